// The verbs provider on a host with an RDMA device (skipped elsewhere): two QPs of the
// first device connected to each other through its RoCE v2 GID move every opcode's data,
// and, with a GPU, cudaMalloc memory registers (dma-buf or peer memory) and carries a
// WRITE. IBEX_TEST_VERBS_DEVICE picks the device.
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <infiniband/verbs.h>

#include <gtest/gtest.h>

#include "tests/support/endpoint.h"

#if IBEX_HAVE_CUDA
#include "tests/allreduce/cuda/gpu.h"
#endif

namespace {

using ibex::test::Endpoint;

std::string first_verbs_device() {
    if (const char *d = std::getenv("IBEX_TEST_VERBS_DEVICE"); d && *d) return d;
    int n = 0;
    ibv_device **l = ibv_get_device_list(&n);
    std::string name = l && n > 0 ? ibv_get_device_name(l[0]) : "";
    if (l) ibv_free_device_list(l);
    return name;
}

#define REQUIRE_RDMA_DEVICE(dev)                                                                       \
    const std::string dev = first_verbs_device();                                                      \
    if (dev.empty()) GTEST_SKIP() << "no RDMA device on this host: the verbs provider runs on an RNIC"

TEST(VerbsHardware, LoopbackEveryOpcode) {
    REQUIRE_RDMA_DEVICE(dev);
    Endpoint a, b;
    a.open(1 << 20, dev.c_str());
    b.open(1 << 20, dev.c_str());
    ASSERT_TRUE(a.ok() && b.ok());
    ibex::test::connect_pair(a, b);
    for (size_t i = 0; i < a.buf.size(); ++i) a.buf[i] = static_cast<uint8_t>(i * 7);

    IBEX_ASSERT_OK(b.post_recv(1, 0, 65536));
    IBEX_ASSERT_OK(a.post_rdma(IBEX_WR_SEND, 2, 0, 65536, 0, 0));
    auto wb = b.wait(1), wa = a.wait(1);
    ASSERT_EQ(wb.size(), 1u);
    EXPECT_EQ(wb[0].status, IBEX_WC_SUCCESS);
    EXPECT_EQ(wb[0].byte_len, 65536u);
    EXPECT_EQ(std::memcmp(a.buf.data(), b.buf.data(), 65536), 0);

    IBEX_ASSERT_OK(b.post_recv(3, 0, 0));
    IBEX_ASSERT_OK(a.post_rdma(IBEX_WR_RDMA_WRITE_WITH_IMM, 4, 100, 300000, b.va(200000), ibex_mr_rkey(b.mr), true, 0xabcd));
    wb = b.wait(1);
    ASSERT_EQ(wb.size(), 1u);
    EXPECT_EQ(wb[0].opcode, IBEX_WC_RECV_RDMA_WITH_IMM);
    EXPECT_EQ(wb[0].imm_data, 0xabcdu);
    EXPECT_EQ(std::memcmp(a.buf.data() + 100, b.buf.data() + 200000, 300000), 0);
    a.wait(1);

    IBEX_ASSERT_OK(a.post_rdma(IBEX_WR_RDMA_READ, 5, 600000, 4096, b.va(200000), ibex_mr_rkey(b.mr)));
    wa = a.wait(1);
    ASSERT_EQ(wa.size(), 1u);
    EXPECT_EQ(wa[0].status, IBEX_WC_SUCCESS);
    EXPECT_EQ(std::memcmp(a.buf.data() + 600000, b.buf.data() + 200000, 4096), 0);

    uint64_t v = 40;
    std::memcpy(b.buf.data() + 8192, &v, 8);
    IBEX_ASSERT_OK(a.post_atomic(IBEX_WR_ATOMIC_FETCH_AND_ADD, 6, 700000, b.va(8192), ibex_mr_rkey(b.mr), 2));
    wa = a.wait(1);
    ASSERT_EQ(wa.size(), 1u);
    EXPECT_EQ(wa[0].status, IBEX_WC_SUCCESS);
    std::memcpy(&v, a.buf.data() + 700000, 8);
    EXPECT_EQ(v, 40u);
    std::memcpy(&v, b.buf.data() + 8192, 8);
    EXPECT_EQ(v, 42u);

    // A bad rkey is a remote access error, reported as verbs reports it.
    IBEX_ASSERT_OK(a.post_rdma(IBEX_WR_RDMA_WRITE, 7, 0, 64, b.va(0), ibex_mr_rkey(b.mr) ^ 0x5a5a00));
    wa = a.wait(1);
    ASSERT_EQ(wa.size(), 1u);
    EXPECT_EQ(wa[0].status, IBEX_WC_REM_ACCESS_ERR) << ibex_wc_status_str(wa[0].status);
}

TEST(VerbsHardware, CompletionChannelWakesCqWait) {
    REQUIRE_RDMA_DEVICE(dev);
    Endpoint a, b;
    a.open(4096, dev.c_str());
    b.open(4096, dev.c_str());
    ibex::test::connect_pair(a, b);
    EXPECT_EQ(ibex_cq_wait(b.cq, 50), IBEX_ERR_TIMEOUT);
    IBEX_ASSERT_OK(b.post_recv(1, 0, 64));
    IBEX_ASSERT_OK(a.post_rdma(IBEX_WR_SEND, 2, 0, 64, 0, 0));
    IBEX_ASSERT_OK(ibex_cq_wait(b.cq, 5000));
    EXPECT_EQ(b.wait(1).size(), 1u);
}

#if IBEX_HAVE_CUDA
TEST(VerbsHardware, GpuMemoryRegistersAndCarriesAWrite) {
    REQUIRE_RDMA_DEVICE(dev);
    IBEX_REQUIRE_GPU();
    Endpoint a, b;
    a.open(1 << 16, dev.c_str());
    b.open(1 << 16, dev.c_str());
    ibex::test::connect_pair(a, b);
    ibex::test::DeviceBuffer d(1 << 16);
    ibex_mr_t *mr = nullptr;
    // No dma-buf and no nvidia_peermem is a clear NOT_SUPPORTED, not a crash.
    const ibex_status_t st = ibex_reg_mr(b.pd, d.p, d.bytes, ibex::test::kAllAccess, &mr);
    if (st == IBEX_ERR_NOT_SUPPORTED) GTEST_SKIP() << "GPUDirect RDMA unavailable: " << ibex_last_error();
    ASSERT_EQ(st, IBEX_OK) << ibex_last_error();
    for (size_t i = 0; i < a.buf.size(); ++i) a.buf[i] = static_cast<uint8_t>(i * 13);
    IBEX_ASSERT_OK(a.post_rdma(IBEX_WR_RDMA_WRITE, 1, 0, 1 << 16, reinterpret_cast<uintptr_t>(d.p), ibex_mr_rkey(mr)));
    auto wa = a.wait(1);
    ASSERT_EQ(wa.size(), 1u);
    EXPECT_EQ(wa[0].status, IBEX_WC_SUCCESS);
    std::vector<uint8_t> got(1 << 16);
    d.download(got.data(), got.size());
    EXPECT_EQ(got, a.buf);
    IBEX_ASSERT_OK(ibex_dereg_mr(mr));
}
#endif

} // namespace
