// CUDA device memory registered on the soft provider: every opcode moves the right bytes
// in and out of GPU memory through the staging shadows, and data is on the GPU when its
// completion is polled (plain WRITE: after the target's next poll/progress).
#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

#include <gtest/gtest.h>
#include <sys/mman.h>

#include "runtime/base/simulated_device.h"
#include "tests/support/endpoint.h"
#include "transport/soft/engine/staging.h"

#if IBEX_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "tests/allreduce/cuda/gpu.h"
#endif

namespace {

using ibex::test::Endpoint;

TEST(SoftStaging, DirtyRangesMergeOnlyWhatTouches) {
    using Ranges = std::vector<std::pair<uint64_t, uint64_t>>;
    auto sorted = [](Ranges r) {
        std::sort(r.begin(), r.end());
        return r;
    };
    Ranges r;
    ibex::soft::staging::add_range(r, 100, 10);
    ibex::soft::staging::add_range(r, 200, 10);
    ibex::soft::staging::add_range(r, 0, 0); // empty: nothing
    EXPECT_EQ(sorted(r), (Ranges{{100, 10}, {200, 10}}));
    ibex::soft::staging::add_range(r, 105, 10); // overlaps the first
    EXPECT_EQ(sorted(r), (Ranges{{100, 15}, {200, 10}}));
    ibex::soft::staging::add_range(r, 115, 5); // touches it
    EXPECT_EQ(sorted(r), (Ranges{{100, 20}, {200, 10}}));
    ibex::soft::staging::add_range(r, 50, 10); // apart: kept apart (the gap is the GPU's)
    EXPECT_EQ(sorted(r), (Ranges{{50, 10}, {100, 20}, {200, 10}}));
    ibex::soft::staging::add_range(r, 55, 150); // bridges all three
    EXPECT_EQ(sorted(r), (Ranges{{50, 160}}));
}

TEST(SoftStaging, HostMemoryNeedsNoStaging) {
    Endpoint a;
    a.open(4096);
    ASSERT_TRUE(a.ok());
    EXPECT_FALSE(ibex::soft::staging::active());
    EXPECT_EQ(ibex_memory_type(a.buf.data()), IBEX_MEMORY_HOST);
}

// The memory type of a region is decided where it starts (simulated device memory,
// runtime/base/simulated_device.h, stands in for a GPU): a region that starts in host
// memory and ends in GPU memory would get no shadow, so it is refused.
TEST(SoftStaging, RegionStartingInHostMemoryAndEndingOnTheGpuIsRefused) {
    ibex_context_t *ctx = nullptr;
    ibex_pd_t *pd = nullptr;
    IBEX_ASSERT_OK(ibex_open_device("udp:lo", nullptr, &ctx));
    IBEX_ASSERT_OK(ibex_alloc_pd(ctx, &pd));
    void *map = mmap(nullptr, 4 * 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(map, MAP_FAILED);
    std::vector<uint8_t> backing(3 * 4096);
    uint8_t *view = static_cast<uint8_t *>(map) + 0x200;
    ASSERT_TRUE(ibex::cuda::simulated::add_range(view, backing.size(), backing.data()));
    ibex_mr_t *mr = nullptr;
    EXPECT_EQ(ibex_reg_mr(pd, map, 0x200 + backing.size(), IBEX_ACCESS_LOCAL_WRITE, &mr), IBEX_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(ibex_last_error()).find("ends in GPU memory"), std::string::npos) << ibex_last_error();
    ibex::cuda::simulated::clear();
    munmap(map, 4 * 4096);
    ibex_dealloc_pd(pd);
    ibex_close_device(ctx);
}

std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
    std::vector<uint8_t> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(i * 131 + seed);
    return v;
}

ibex_status_t post(ibex_qp_t *qp, ibex_wr_opcode_t op, uint64_t local, uint32_t len, uint32_t lkey, uint64_t remote,
                   uint32_t rkey, uint32_t imm = 0, unsigned flags = IBEX_SEND_SIGNALED) {
    ibex_sge_t s{local, len, lkey};
    ibex_send_wr_t wr{};
    wr.wr_id = 1;
    wr.sg_list = &s;
    wr.num_sge = 1;
    wr.opcode = op;
    wr.send_flags = flags;
    wr.imm_data = imm;
    wr.wr.rdma.remote_addr = remote;
    wr.wr.rdma.rkey = rkey;
    return ibex_post_send(qp, &wr, nullptr);
}

// Pipelined staging: post_send does not wait for the GPU -> shadow copies; the
// requester holds each WR until its copies are done. Simulated GPU memory whose copies
// finish late (only at the third look) stands in for a busy copy engine: a WR sent
// before its copy finished would carry the shadow's old bytes (zeros).
TEST(SoftStaging, WritesFromGpuMemoryWaitForTheirLateCopies) {
    Endpoint a, b;
    a.open(4096);
    b.open(1 << 20);
    ibex::test::connect_pair(a, b);
    constexpr size_t kWrs = 8, kLen = 65536 + 12, kLead = 0x300;
    void *map = mmap(nullptr, kLead + kWrs * kLen + 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(map, MAP_FAILED);
    std::vector<uint8_t> backing = pattern(kWrs * kLen, 3);
    uint8_t *view = static_cast<uint8_t *>(map) + kLead;
    ASSERT_TRUE(ibex::cuda::simulated::add_range(view, backing.size(), backing.data()));
    ibex::cuda::simulated::set_deferred_copies(3);
    ibex_mr_t *mr = nullptr;
    IBEX_ASSERT_OK(ibex_reg_mr(a.pd, view, backing.size(), ibex::test::kAllAccess, &mr));
    ASSERT_TRUE(ibex::soft::staging::active());
    for (size_t k = 0; k < kWrs; ++k) IBEX_ASSERT_OK(b.post_recv(k, 0, 0));
    for (size_t k = 0; k < kWrs; ++k)
        IBEX_ASSERT_OK(post(a.qp, IBEX_WR_RDMA_WRITE_WITH_IMM, reinterpret_cast<uintptr_t>(view + k * kLen), kLen,
                            ibex_mr_lkey(mr), b.va(k * kLen), ibex_mr_rkey(b.mr), static_cast<uint32_t>(k)));
    size_t sent = 0, landed = 0;
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while ((sent < kWrs || landed < kWrs) && std::chrono::steady_clock::now() < end) {
        ibex_wc_t wc[16];
        int got = 0;
        IBEX_ASSERT_OK(ibex_poll_cq(a.cq, 16, wc, &got));
        for (int i = 0; i < got; ++i) EXPECT_EQ(wc[i].status, IBEX_WC_SUCCESS) << ibex_wc_status_str(wc[i].status);
        sent += static_cast<size_t>(got);
        IBEX_ASSERT_OK(ibex_poll_cq(b.cq, 16, wc, &got));
        for (int i = 0; i < got; ++i) EXPECT_EQ(wc[i].status, IBEX_WC_SUCCESS) << ibex_wc_status_str(wc[i].status);
        landed += static_cast<size_t>(got);
    }
    EXPECT_EQ(sent, kWrs);
    EXPECT_EQ(landed, kWrs);
    EXPECT_EQ(std::memcmp(b.buf.data(), backing.data(), backing.size()), 0) << "a WR left before its staging copy was done";
    EXPECT_EQ(ibex_dereg_mr(mr), IBEX_OK);
    ibex::cuda::simulated::set_deferred_copies(0);
    ibex::cuda::simulated::clear();
    munmap(map, kLead + kWrs * kLen + 4096);
}

#if IBEX_HAVE_CUDA

using ibex::test::DeviceBuffer;

struct GpuPair {
    Endpoint a, b;
    DeviceBuffer da{1 << 20}, db{1 << 20};
    ibex_mr_t *ma = nullptr, *mb = nullptr;
    void open() {
        a.open(4096);
        b.open(4096);
        ibex::test::connect_pair(a, b);
        IBEX_ASSERT_OK(ibex_reg_mr(a.pd, da.p, da.bytes, ibex::test::kAllAccess, &ma));
        IBEX_ASSERT_OK(ibex_reg_mr(b.pd, db.p, db.bytes, ibex::test::kAllAccess, &mb));
    }
    ~GpuPair() {
        if (ma) ibex_dereg_mr(ma);
        if (mb) ibex_dereg_mr(mb);
    }
    uint64_t va(const DeviceBuffer &d, size_t off = 0) const { return reinterpret_cast<uintptr_t>(d.p) + off; }
};

ibex_status_t post_recv(ibex_qp_t *qp, uint64_t local, uint32_t len, uint32_t lkey) {
    ibex_sge_t s{local, len, lkey};
    ibex_recv_wr_t wr{};
    wr.wr_id = 2;
    wr.sg_list = &s;
    wr.num_sge = 1;
    return ibex_post_recv(qp, &wr, nullptr);
}

void expect_one_success(Endpoint &e) {
    auto wc = e.wait(1);
    ASSERT_EQ(wc.size(), 1u);
    EXPECT_EQ(wc[0].status, IBEX_WC_SUCCESS) << ibex_wc_status_str(wc[0].status);
}

TEST(SoftStaging, SendRecvWriteReadAtomicOnGpuMemory) {
    IBEX_REQUIRE_GPU();
    GpuPair p;
    p.open();
    ASSERT_TRUE(ibex::soft::staging::active());
    const size_t n = 200000; // many packets
    const auto src = pattern(n, 7);
    p.da.upload(src.data(), n);

    // SEND GPU -> RECV GPU: the data is on b's GPU when b polls the completion.
    IBEX_ASSERT_OK(post_recv(p.b.qp, p.va(p.db, 1000), n, ibex_mr_lkey(p.mb)));
    IBEX_ASSERT_OK(post(p.a.qp, IBEX_WR_SEND, p.va(p.da), n, ibex_mr_lkey(p.ma), 0, 0));
    expect_one_success(p.b);
    expect_one_success(p.a);
    std::vector<uint8_t> got(n);
    p.db.download(got.data(), n, 1000);
    EXPECT_EQ(got, src);

    // A GPU-side change after registration is what the next WRITE_WITH_IMM carries.
    const auto src2 = pattern(n, 99);
    p.da.upload(src2.data(), n);
    IBEX_ASSERT_OK(post_recv(p.b.qp, 0, 0, 0));
    IBEX_ASSERT_OK(post(p.a.qp, IBEX_WR_RDMA_WRITE_WITH_IMM, p.va(p.da), n, ibex_mr_lkey(p.ma), p.va(p.db, 4096),
                        ibex_mr_rkey(p.mb), 0x1234));
    expect_one_success(p.b);
    expect_one_success(p.a);
    p.db.download(got.data(), n, 4096);
    EXPECT_EQ(got, src2);

    // Plain WRITE: visible after the target's next progress call.
    const auto src3 = pattern(4096, 3);
    p.da.upload(src3.data(), src3.size(), 8192);
    IBEX_ASSERT_OK(post(p.a.qp, IBEX_WR_RDMA_WRITE, p.va(p.da, 8192), 4096, ibex_mr_lkey(p.ma), p.va(p.db, 500000),
                        ibex_mr_rkey(p.mb)));
    expect_one_success(p.a); // acknowledged: the bytes are in b's shadow
    IBEX_ASSERT_OK(ibex_progress(p.b.ctx));
    std::vector<uint8_t> got3(4096);
    p.db.download(got3.data(), got3.size(), 500000);
    EXPECT_EQ(got3, src3);

    // READ b's GPU memory into a's GPU memory, after a GPU-side change on b.
    const auto src4 = pattern(65536, 42);
    p.db.upload(src4.data(), src4.size(), 600000);
    IBEX_ASSERT_OK(post(p.a.qp, IBEX_WR_RDMA_READ, p.va(p.da, 300000), 65536, ibex_mr_lkey(p.ma), p.va(p.db, 600000),
                        ibex_mr_rkey(p.mb)));
    expect_one_success(p.a);
    std::vector<uint8_t> got4(65536);
    p.da.download(got4.data(), got4.size(), 300000);
    EXPECT_EQ(got4, src4);

    // FETCH_ADD on b's GPU memory, original value returned into a's GPU memory.
    const uint64_t start = 1000;
    p.db.upload(&start, 8, 800000);
    ibex_sge_t s{p.va(p.da, 900000), 8, ibex_mr_lkey(p.ma)};
    ibex_send_wr_t wr{};
    wr.sg_list = &s;
    wr.num_sge = 1;
    wr.opcode = IBEX_WR_ATOMIC_FETCH_AND_ADD;
    wr.send_flags = IBEX_SEND_SIGNALED;
    wr.wr.atomic.remote_addr = p.va(p.db, 800000);
    wr.wr.atomic.rkey = ibex_mr_rkey(p.mb);
    wr.wr.atomic.compare_add = 5;
    IBEX_ASSERT_OK(ibex_post_send(p.a.qp, &wr, nullptr));
    expect_one_success(p.a);
    uint64_t orig = 0, now = 0;
    p.da.download(&orig, 8, 900000);
    EXPECT_EQ(orig, start);
    IBEX_ASSERT_OK(ibex_progress(p.b.ctx));
    p.db.download(&now, 8, 800000);
    EXPECT_EQ(now, start + 5);
}

TEST(SoftStaging, InlineDataFromGpuMemoryIsRefused) {
    IBEX_REQUIRE_GPU();
    GpuPair p;
    p.open();
    EXPECT_EQ(post(p.a.qp, IBEX_WR_RDMA_WRITE, p.va(p.da), 16, ibex_mr_lkey(p.ma), p.va(p.db), ibex_mr_rkey(p.mb), 0,
                   IBEX_SEND_SIGNALED | IBEX_SEND_INLINE),
              IBEX_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(ibex_last_error()).find("inline"), std::string::npos) << ibex_last_error();
}

#endif

} // namespace
