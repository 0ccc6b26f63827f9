// GPU memory on the shm provider (transport/shm/gpu.cpp): every opcode between GPU
// buffers, and between host and GPU buffers, lands the right bytes, with each mechanism
// (the initiator's copy into the peer's exported allocation, the target's copies, the
// ring). Each case runs on simulated GPU memory (runtime/base/simulated_device.h: a view
// the CPU cannot touch, so a CPU access to it would crash the test) and on real CUDA memory
// where a GPU is present. Between processes, real GPU memory is mapped through CUDA IPC;
// simulated memory cannot be, and a request that needs it is refused cleanly.
#include <sys/mman.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/base/cuda_memory.h"
#include "runtime/base/simulated_device.h"
#include "tests/support/child_process.h"
#include "tests/transport/shm/shm_pair.h"

#if IBEX_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

using namespace ibex::test;

namespace {

constexpr size_t kBytes = 1 << 20;
constexpr unsigned kAll = IBEX_ACCESS_LOCAL_WRITE | IBEX_ACCESS_REMOTE_WRITE | IBEX_ACCESS_REMOTE_READ |
                          IBEX_ACCESS_REMOTE_ATOMIC;

std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
    std::vector<uint8_t> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(i * 131 + seed + (i >> 9));
    return v;
}

// GPU memory of one kind, with host-side upload and download.
class GpuMemory {
public:
    virtual ~GpuMemory() = default;
    virtual void *ptr() const = 0;
    virtual void upload(const void *src, size_t n, size_t off) = 0;
    virtual void download(void *dst, size_t n, size_t off) const = 0;
    uint64_t va(size_t off = 0) const { return reinterpret_cast<uintptr_t>(ptr()) + off; }
};

// A view the CPU cannot touch (PROT_NONE), backed by host bytes the library reaches.
class SimulatedGpuMemory : public GpuMemory {
public:
    explicit SimulatedGpuMemory(size_t n) : backing_(n) {
        view_ = mmap(nullptr, n, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        EXPECT_NE(view_, MAP_FAILED);
        EXPECT_TRUE(ibex::cuda::simulated::add_range(view_, n, backing_.data()));
    }
    ~SimulatedGpuMemory() override { munmap(view_, backing_.size()); }
    void *ptr() const override { return view_; }
    void upload(const void *src, size_t n, size_t off) override { std::memcpy(backing_.data() + off, src, n); }
    void download(void *dst, size_t n, size_t off) const override { std::memcpy(dst, backing_.data() + off, n); }

private:
    void *view_ = nullptr;
    std::vector<uint8_t> backing_;
};

#if IBEX_HAVE_CUDA
class CudaGpuMemory : public GpuMemory {
public:
    explicit CudaGpuMemory(size_t n) { EXPECT_EQ(cudaMalloc(&p_, n), cudaSuccess); }
    ~CudaGpuMemory() override { cudaFree(p_); }
    void *ptr() const override { return p_; }
    void upload(const void *src, size_t n, size_t off) override {
        ASSERT_EQ(cudaMemcpy(static_cast<uint8_t *>(p_) + off, src, n, cudaMemcpyHostToDevice), cudaSuccess);
    }
    void download(void *dst, size_t n, size_t off) const override {
        ASSERT_EQ(cudaMemcpy(dst, static_cast<uint8_t *>(p_) + off, n, cudaMemcpyDeviceToHost), cudaSuccess);
    }

private:
    void *p_ = nullptr;
};
#endif

// Why GPU memory of `kind` cannot be had here, or "". Asked in a child process, so that
// this one has not started CUDA when a test forks (a child must not inherit a CUDA context).
std::string unavailable(const std::string &kind) {
    if (kind == "simulated") return "";
    if (!ibex::cuda::built()) return "ibex was built without CUDA";
    ChildProcess probe;
    char why[256] = {};
    const bool started = probe.start([](int fd) -> int {
        char reason[256] = {};
        std::snprintf(reason, sizeof reason, "%s", ibex::cuda::available() ? "" : ibex::cuda::unavailable_reason());
        return send_all(fd, reason, sizeof reason) ? 0 : 1;
    });
    if (!started || !recv_all(probe.fd(), why, sizeof why) || probe.wait_exit(30000) != 0) return "the GPU probe process failed";
    return why[0] ? std::string("no usable GPU: ") + why : "";
}

std::unique_ptr<GpuMemory> gpu_memory(const std::string &kind, size_t n) {
#if IBEX_HAVE_CUDA
    if (kind == "cuda") return std::make_unique<CudaGpuMemory>(n);
#endif
    return std::make_unique<SimulatedGpuMemory>(n);
}

ibex_status_t post(ibex_qp_t *qp, ibex_wr_opcode_t op, uint64_t wr_id, uint64_t local, uint32_t len, uint32_t lkey,
                   uint64_t remote = 0, uint32_t rkey = 0, uint64_t compare_add = 0, uint64_t swap = 0) {
    if (op == IBEX_WR_ATOMIC_CMP_AND_SWP || op == IBEX_WR_ATOMIC_FETCH_AND_ADD)
        return post_atomic_wr(qp, op, wr_id, local, lkey, remote, rkey, compare_add, swap);
    return post_one_wr(qp, op, wr_id, local, len, lkey, remote, rkey, true, 0x5eed);
}

ibex_status_t post_recv(ibex_qp_t *qp, uint64_t wr_id, uint64_t local, uint32_t len, uint32_t lkey) {
    ibex_sge_t s{local, len, lkey};
    ibex_recv_wr_t wr{};
    wr.wr_id = wr_id;
    wr.sg_list = &s;
    wr.num_sge = len ? 1 : 0;
    return ibex_post_recv(qp, &wr, nullptr);
}

// n completions on e, all successful, in wr_id order.
void expect_successes(Endpoint &e, std::vector<uint64_t> ids) {
    auto wc = e.wait(ids.size());
    ASSERT_EQ(wc.size(), ids.size());
    for (size_t i = 0; i < wc.size(); ++i) {
        EXPECT_EQ(wc[i].status, IBEX_WC_SUCCESS) << ibex_wc_status_str(wc[i].status);
        EXPECT_EQ(wc[i].wr_id, ids[i]);
    }
}

// Two shm endpoints of this process with a GPU region each, registered with every right.
struct GpuShmPair {
    ShmPair p;
    std::unique_ptr<GpuMemory> ga, gb;
    ibex_mr_t *ma = nullptr, *mb = nullptr;
    void open(const std::string &kind, const char *copy) {
        ga = gpu_memory(kind, kBytes);
        gb = gpu_memory(kind, kBytes);
        p.open(4 << 20, copy);
        if (::testing::Test::HasFatalFailure()) return;
        IBEX_ASSERT_OK(ibex_reg_mr(p.a.pd, ga->ptr(), kBytes, kAll, &ma));
        IBEX_ASSERT_OK(ibex_reg_mr(p.b.pd, gb->ptr(), kBytes, kAll, &mb));
    }
    ~GpuShmPair() {
        if (ma) ibex_dereg_mr(ma);
        if (mb) ibex_dereg_mr(mb);
        p.a.close();
        p.b.close();
        ibex::cuda::simulated::set_deferred_copies(0);
        ibex::cuda::simulated::clear();
    }
};

class ShmGpu : public ::testing::TestWithParam<std::string> {
protected:
    void SetUp() override {
        if (const std::string why = unavailable(GetParam()); !why.empty()) GTEST_SKIP() << why << "; this case runs on a CUDA host";
    }
};

// WRITE, READ, WRITE_WITH_IMM, SEND and both atomics between the GPU buffers of a and b.
void every_opcode_gpu_to_gpu(GpuShmPair &g) {
    Endpoint &a = g.p.a, &b = g.p.b;
    const uint32_t la = ibex_mr_lkey(g.ma), rb = ibex_mr_rkey(g.mb), lb = ibex_mr_lkey(g.mb);
    const size_t n = 300007;
    const auto w = pattern(n, 1), r = pattern(n, 2), i = pattern(n, 3), s = pattern(n, 4);
    g.ga->upload(w.data(), n, 0);
    g.gb->upload(r.data(), n, 400000);
    g.ga->upload(i.data(), n, 700000);
    // a WRITE and a READ back to back: the READ lands while the WRITE may still be queued
    IBEX_ASSERT_OK(post(a.qp, IBEX_WR_RDMA_WRITE, 1, g.ga->va(0), n, la, g.gb->va(0), rb));
    IBEX_ASSERT_OK(post(a.qp, IBEX_WR_RDMA_READ, 2, g.ga->va(350000), n, la, g.gb->va(400000), rb));
    expect_successes(a, {1, 2});
    std::vector<uint8_t> got(n);
    g.gb->download(got.data(), n, 0);
    EXPECT_EQ(got, w) << "WRITE";
    g.ga->download(got.data(), n, 350000);
    EXPECT_EQ(got, r) << "READ";

    IBEX_ASSERT_OK(post_recv(b.qp, 10, 0, 0, 0));
    IBEX_ASSERT_OK(post(a.qp, IBEX_WR_RDMA_WRITE_WITH_IMM, 3, g.ga->va(700000), n, la, g.gb->va(700000), rb));
    expect_successes(a, {3});
    auto wc = b.wait(1);
    ASSERT_EQ(wc.size(), 1u);
    EXPECT_EQ(wc[0].status, IBEX_WC_SUCCESS);
    EXPECT_EQ(wc[0].imm_data, 0x5eedu);
    g.gb->download(got.data(), n, 700000); // in place when the receive completes
    EXPECT_EQ(got, i) << "WRITE_WITH_IMM";

    g.ga->upload(s.data(), n, 0);
    IBEX_ASSERT_OK(post_recv(b.qp, 11, g.gb->va(300000), n, lb));
    IBEX_ASSERT_OK(post(a.qp, IBEX_WR_SEND, 4, g.ga->va(0), n, la));
    expect_successes(a, {4});
    wc = b.wait(1);
    ASSERT_EQ(wc.size(), 1u);
    EXPECT_EQ(wc[0].status, IBEX_WC_SUCCESS);
    EXPECT_EQ(wc[0].byte_len, n);
    g.gb->download(got.data(), n, 300000);
    EXPECT_EQ(got, s) << "SEND";

    const uint64_t start = 1000;
    g.gb->upload(&start, 8, 1 << 19);
    IBEX_ASSERT_OK(post(a.qp, IBEX_WR_ATOMIC_FETCH_AND_ADD, 5, g.ga->va(8), 8, la, g.gb->va(1 << 19), rb, 5));
    IBEX_ASSERT_OK(post(a.qp, IBEX_WR_ATOMIC_CMP_AND_SWP, 6, g.ga->va(16), 8, la, g.gb->va(1 << 19), rb, 1005, 77));
    expect_successes(a, {5, 6});
    uint64_t word = 0, orig_add = 0, orig_cas = 0;
    g.gb->download(&word, 8, 1 << 19);
    g.ga->download(&orig_add, 8, 8);
    g.ga->download(&orig_cas, 8, 16);
    EXPECT_EQ(orig_add, start);
    EXPECT_EQ(orig_cas, start + 5);
    EXPECT_EQ(word, 77u);
}

// Every opcode GPU<->GPU with the copy mechanism `copy` forced (nullptr: chosen); the two
// contexts' counters afterwards.
std::pair<ibex::shm::CopyStats, ibex::shm::CopyStats> every_opcode_with(const std::string &kind, const char *copy) {
    GpuShmPair g;
    g.open(kind, copy);
    if (::testing::Test::HasFatalFailure()) return {};
    every_opcode_gpu_to_gpu(g);
    return {stats(g.p.a), stats(g.p.b)};
}

TEST_P(ShmGpu, EveryOpcodeBetweenGpuBuffers) {
    const auto [sa, sb] = every_opcode_with(GetParam(), nullptr);
    ASSERT_FALSE(HasFatalFailure());
    // The WRITEs and the READ were the initiator's copies into or out of the peer's
    // exported allocation; the SEND the target's, out of the initiator's.
    EXPECT_GE(sa.map_ops, 3u);
    EXPECT_GE(sb.map_ops, 1u);
    EXPECT_EQ(sa.cma_ops + sb.cma_ops, 0u);
}

TEST_P(ShmGpu, EveryOpcodeThroughTheRingWhenForced) {
    const auto [sa, sb] = every_opcode_with(GetParam(), "ring");
    ASSERT_FALSE(HasFatalFailure());
    EXPECT_GT(sa.ring_bytes, 0u);
    EXPECT_GT(sb.ring_bytes, 0u);
    EXPECT_EQ(sa.map_ops + sb.map_ops, 0u);
}

// Host memory (ordinary, and ibex_mem_alloc) against GPU memory, both ways.
TEST_P(ShmGpu, HostAndGpuBuffersMix) {
    GpuShmPair g;
    g.open(GetParam(), nullptr);
    ASSERT_FALSE(HasFatalFailure());
    Endpoint &a = g.p.a, &b = g.p.b;
    AllocRegion host_b(b.pd, kBytes, kAll);
    ASSERT_TRUE(host_b.ok());
    const size_t n = 200003;
    const auto h = pattern(n, 9), d = pattern(n, 10), m = pattern(n, 11);
    std::vector<uint8_t> got(n);

    // a's ordinary host memory -> b's GPU (the initiator's host-to-device copy)
    std::memcpy(a.buf.data(), h.data(), n);
    IBEX_ASSERT_OK(post(a.qp, IBEX_WR_RDMA_WRITE, 1, a.va(0), n, ibex_mr_lkey(a.mr), g.gb->va(0), ibex_mr_rkey(g.mb)));
    expect_successes(a, {1});
    g.gb->download(got.data(), n, 0);
    EXPECT_EQ(got, h) << "host -> GPU WRITE";

    // b's GPU -> a's ordinary host memory by READ
    g.gb->upload(d.data(), n, 500000);
    IBEX_ASSERT_OK(post(a.qp, IBEX_WR_RDMA_READ, 2, a.va(1 << 20), n, ibex_mr_lkey(a.mr), g.gb->va(500000), ibex_mr_rkey(g.mb)));
    expect_successes(a, {2});
    EXPECT_EQ(std::memcmp(a.buf.data() + (1 << 20), d.data(), n), 0) << "GPU -> host READ";

    // a's GPU -> b's ibex_mem_alloc memory, and -> b's ordinary memory (the target copies
    // out of a's export, then)
    g.ga->upload(m.data(), n, 0);
    IBEX_ASSERT_OK(post(a.qp, IBEX_WR_RDMA_WRITE, 3, g.ga->va(0), n, ibex_mr_lkey(g.ma), host_b.at(4096), ibex_mr_rkey(host_b.mr)));
    IBEX_ASSERT_OK(post(a.qp, IBEX_WR_RDMA_WRITE, 4, g.ga->va(0), n, ibex_mr_lkey(g.ma), b.va(8192), ibex_mr_rkey(b.mr)));
    expect_successes(a, {3, 4});
    EXPECT_EQ(std::memcmp(host_b.bytes() + 4096, m.data(), n), 0) << "GPU -> ibex_mem_alloc WRITE";
    EXPECT_EQ(std::memcmp(b.buf.data() + 8192, m.data(), n), 0) << "GPU -> malloc WRITE";

    // a's ordinary host memory -> b's GPU by SEND (the target: cross-memory attach into a
    // host bounce buffer, then up to the GPU)
    IBEX_ASSERT_OK(post_recv(b.qp, 20, g.gb->va(600000), n, ibex_mr_lkey(g.mb)));
    IBEX_ASSERT_OK(post(a.qp, IBEX_WR_SEND, 5, a.va(0), n, ibex_mr_lkey(a.mr)));
    expect_successes(a, {5});
    ASSERT_EQ(b.wait(1).size(), 1u);
    g.gb->download(got.data(), n, 600000);
    EXPECT_EQ(got, h) << "host -> GPU SEND";
}

// The initiator's GPU copies complete their WRs only once the GPU has done them, in order
// with what follows (simulated: the copy engine answers "busy" a few times first).
TEST(ShmGpuSimulated, CompletionsWaitForTheCopiesAndKeepTheirOrder) {
    GpuShmPair g;
    g.open("simulated", nullptr);
    ASSERT_FALSE(::testing::Test::HasFatalFailure());
    ibex::cuda::simulated::set_deferred_copies(4);
    Endpoint &a = g.p.a, &b = g.p.b;
    const size_t n = 65536;
    const auto w = pattern(n, 21);
    g.ga->upload(w.data(), n, 0);
    IBEX_ASSERT_OK(post_recv(b.qp, 30, b.va(0), 64, ibex_mr_lkey(b.mr)));
    IBEX_ASSERT_OK(post(a.qp, IBEX_WR_RDMA_WRITE, 1, g.ga->va(0), n, ibex_mr_lkey(g.ma), g.gb->va(0), ibex_mr_rkey(g.mb)));
    IBEX_ASSERT_OK(post(a.qp, IBEX_WR_SEND, 2, a.va(0), 64, ibex_mr_lkey(a.mr)));
    expect_successes(a, {1, 2});
    // The SEND went after the WRITE's copy was done: its receive sees the WRITE's bytes.
    ASSERT_EQ(b.wait(1).size(), 1u);
    std::vector<uint8_t> got(n);
    g.gb->download(got.data(), n, 0);
    EXPECT_EQ(got, w);
}

// What a child tells its parent: its QP address and its GPU region.
struct PeerRegion {
    ibex_ep_addr_t addr;
    uint64_t va;
    uint32_t rkey, lkey;
};

// The parent's side of meeting a child that sends its PeerRegion first: e opened on shm and
// connected to the child's QP.
PeerRegion meet(Endpoint &e, ChildProcess &child) {
    PeerRegion in{};
    e.open(kBytes, "shm");
    EXPECT_TRUE(e.ok());
    EXPECT_TRUE(recv_all(child.fd(), &in, sizeof in));
    const ibex_ep_addr_t mine = e.addr();
    EXPECT_TRUE(send_all(child.fd(), &mine, sizeof mine));
    EXPECT_EQ(ibex_qp_connect(e.qp, &in.addr), IBEX_OK) << ibex_last_error();
    return in;
}

// A peer in another process reaches GPU memory only through a CUDA IPC handle. Simulated
// memory has none: a SEND out of it is refused (a remote operation error) and the target's
// buffer is untouched; real GPU memory moves both ways, and the mapping goes with the QP.
TEST_P(ShmGpu, AnotherProcessMapsTheExportedAllocation) {
    const bool real = GetParam() == "cuda";
    // Both processes set up CUDA after the fork (a child must not inherit a CUDA context).
    ChildProcess child;
    ASSERT_TRUE(child.start([real](int fd) -> int {
        Endpoint e;
        e.open(kBytes, "shm");
        if (!e.ok()) return 2;
        std::unique_ptr<GpuMemory> gm = gpu_memory(real ? "cuda" : "simulated", kBytes);
        ibex_mr_t *mr = nullptr;
        if (ibex_reg_mr(e.pd, gm->ptr(), kBytes, kAll, &mr) != IBEX_OK) return 3;
        const auto mine = pattern(kBytes, 50);
        gm->upload(mine.data(), kBytes, 0);
        const PeerRegion out{e.addr(), gm->va(0), ibex_mr_rkey(mr), ibex_mr_lkey(mr)};
        ibex_ep_addr_t peer{};
        if (!send_all(fd, &out, sizeof out) || !recv_all(fd, &peer, sizeof peer)) return 4;
        if (ibex_qp_connect(e.qp, &peer) != IBEX_OK) return 5;
        if (!real) {
            // A SEND out of simulated GPU memory the parent cannot map.
            if (post(e.qp, IBEX_WR_SEND, 1, gm->va(0), 4096, ibex_mr_lkey(mr)) != IBEX_OK) return 6;
            auto wc = e.wait(1);
            const int st = wc.size() == 1 ? wc[0].status : -1;
            if (!send_all(fd, &st, sizeof st)) return 7;
        }
        char done = 0;
        if (!recv_all(fd, &done, 1, 60000)) return 8;
        // The parent wrote its pattern at 1 MiB / 2 and read ours from 0.
        std::vector<uint8_t> got(kBytes / 2);
        gm->download(got.data(), got.size(), kBytes / 2);
        const bool ok = !real || got == pattern(kBytes / 2, 60);
        ibex_dereg_mr(mr);
        return ok ? 0 : 9;
    }));
    Endpoint e;
    const PeerRegion in = meet(e, child);
    ASSERT_FALSE(HasFailure());
    if (!real) {
        IBEX_ASSERT_OK(post_recv(e.qp, 40, e.va(0), 4096, ibex_mr_lkey(e.mr)));
        int st = -1;
        ASSERT_TRUE(recv_all(child.fd(), &st, sizeof st));
        EXPECT_EQ(st, IBEX_WC_REM_OP_ERR) << ibex_wc_status_str(static_cast<ibex_wc_status_t>(st));
        EXPECT_EQ(std::count(e.buf.begin(), e.buf.begin() + 4096, 0), 4096) << "the target's buffer was touched";
    } else {
        const auto w = pattern(kBytes / 2, 60);
        std::unique_ptr<GpuMemory> gm = gpu_memory("cuda", kBytes);
        ibex_mr_t *mr = nullptr;
        IBEX_ASSERT_OK(ibex_reg_mr(e.pd, gm->ptr(), kBytes, kAll, &mr));
        gm->upload(w.data(), w.size(), 0);
        IBEX_ASSERT_OK(post(e.qp, IBEX_WR_RDMA_WRITE, 1, gm->va(0), kBytes / 2, ibex_mr_lkey(mr), in.va + kBytes / 2, in.rkey));
        IBEX_ASSERT_OK(post(e.qp, IBEX_WR_RDMA_READ, 2, gm->va(kBytes / 2), kBytes / 2, ibex_mr_lkey(mr), in.va, in.rkey));
        expect_successes(e, {1, 2});
        std::vector<uint8_t> got(kBytes / 2);
        gm->download(got.data(), got.size(), kBytes / 2);
        const auto theirs = pattern(kBytes, 50);
        EXPECT_EQ(got, std::vector<uint8_t>(theirs.begin(), theirs.begin() + kBytes / 2)) << "READ";
        const auto s = stats(e);
        EXPECT_GE(s.map_ops, 2u) << "the initiator's copies through its CUDA IPC mapping";
        ibex_dereg_mr(mr);
    }
    const char done = 1;
    ASSERT_TRUE(send_all(child.fd(), &done, 1));
    EXPECT_EQ(child.wait_exit(30000), 0);
}

// A peer killed while this process maps its GPU memory: CUDA keeps the allocation alive
// while mapped, so a copy into it would "succeed"; the provider looks at the peer process
// before a GPU copy (every 100 ms at most), sends the WRITE the request way instead, and
// it fails with a retry error, the QP in error, and nothing crashes.
TEST(ShmGpuCuda, APeerKilledWhileMappedFailsTheQp) {
    if (const std::string why = unavailable("cuda"); !why.empty()) GTEST_SKIP() << why << "; this case runs on a CUDA host";
    ChildProcess child;
    ASSERT_TRUE(child.start([](int fd) -> int {
        Endpoint e;
        e.open(kBytes, "shm");
        if (!e.ok()) return 2;
        std::unique_ptr<GpuMemory> gm = gpu_memory("cuda", kBytes);
        ibex_mr_t *mr = nullptr;
        if (ibex_reg_mr(e.pd, gm->ptr(), kBytes, kAll, &mr) != IBEX_OK) return 3;
        const PeerRegion out{e.addr(), gm->va(0), ibex_mr_rkey(mr), ibex_mr_lkey(mr)};
        ibex_ep_addr_t peer{};
        if (!send_all(fd, &out, sizeof out) || !recv_all(fd, &peer, sizeof peer)) return 4;
        if (ibex_qp_connect(e.qp, &peer) != IBEX_OK) return 5;
        char never = 0;
        recv_all(fd, &never, 1, 60000); // until killed
        return 0;
    }));
    Endpoint e;
    const PeerRegion in = meet(e, child);
    ASSERT_FALSE(HasFailure());
    std::unique_ptr<GpuMemory> gm = gpu_memory("cuda", kBytes);
    ibex_mr_t *mr = nullptr;
    IBEX_ASSERT_OK(ibex_reg_mr(e.pd, gm->ptr(), kBytes, kAll, &mr));
    IBEX_ASSERT_OK(post(e.qp, IBEX_WR_RDMA_WRITE, 1, gm->va(0), 65536, ibex_mr_lkey(mr), in.va, in.rkey));
    expect_successes(e, {1}); // mapped now
    child.kill_and_reap();
    usleep(150000); // past the next look at the peer
    IBEX_ASSERT_OK(post(e.qp, IBEX_WR_RDMA_WRITE, 2, gm->va(0), 65536, ibex_mr_lkey(mr), in.va, in.rkey));
    const auto wc = e.wait(1, 20000);
    ASSERT_EQ(wc.size(), 1u) << "no completion for a WRITE to a dead peer";
    EXPECT_EQ(wc[0].status, IBEX_WC_RETRY_EXC_ERR) << ibex_wc_status_str(wc[0].status);
    EXPECT_EQ(e.qp_state(), IBEX_QPS_ERR);
    ibex_dereg_mr(mr);
}

INSTANTIATE_TEST_SUITE_P(Memory, ShmGpu, ::testing::Values("simulated", "cuda"),
                         [](const auto &info) { return info.param; });

} // namespace
