// The RC engine end to end between two contexts of one process over loopback UDP: each
// opcode once, data verified. (Two-process, fault-injection and protection suites live in
// their own files.)
#include <cstdio>
#include <numeric>
#include <string>
#include <sys/resource.h>

#include "tests/support/endpoint.h"
#include "tests/support/threads.h"

using namespace ibex::test;

namespace {

class RcInProcess : public ::testing::Test {
protected:
    void SetUp() override {
        a.open(1 << 20);
        b.open(1 << 20);
        connect_pair(a, b);
    }
    Endpoint a, b;
};

TEST_F(RcInProcess, RdmaWriteLandsInPeerMemory) {
    for (size_t i = 0; i < 100000; ++i) a.buf[i] = static_cast<uint8_t>(i * 7 + 1);
    IBEX_ASSERT_OK(a.post_rdma(IBEX_WR_RDMA_WRITE, 42, 0, 100000, b.va(1000), ibex_mr_rkey(b.mr)));
    auto wc = a.wait(1);
    ASSERT_EQ(wc.size(), 1u);
    EXPECT_EQ(wc[0].status, IBEX_WC_SUCCESS) << ibex_wc_status_str(wc[0].status);
    EXPECT_EQ(wc[0].wr_id, 42u);
    EXPECT_EQ(wc[0].opcode, IBEX_WC_RDMA_WRITE);
    EXPECT_EQ(0, std::memcmp(b.buf.data() + 1000, a.buf.data(), 100000));
    EXPECT_EQ(b.buf[999], 0);
    EXPECT_EQ(b.buf[101000], 0);
}

TEST_F(RcInProcess, SendWithImmAndReadAndAtomics) {
    IBEX_ASSERT_OK(b.post_recv(7, 0, 5000));
    std::iota(a.buf.begin(), a.buf.begin() + 4999, 3);
    IBEX_ASSERT_OK(a.post_rdma(IBEX_WR_SEND_WITH_IMM, 1, 0, 4999, 0, 0, true, 0xabcdef01));
    auto rc = b.wait(1);
    ASSERT_EQ(rc.size(), 1u);
    EXPECT_EQ(rc[0].status, IBEX_WC_SUCCESS);
    EXPECT_EQ(rc[0].opcode, IBEX_WC_RECV);
    EXPECT_EQ(rc[0].byte_len, 4999u);
    EXPECT_EQ(rc[0].imm_data, 0xabcdef01u);
    EXPECT_TRUE(rc[0].wc_flags & IBEX_WC_WITH_IMM);
    EXPECT_EQ(0, std::memcmp(b.buf.data(), a.buf.data(), 4999));
    ASSERT_EQ(a.wait(1).size(), 1u);

    // READ back 300 KB from b.
    for (size_t i = 0; i < 300000; ++i) b.buf[200000 + i] = static_cast<uint8_t>(i ^ 0x5a);
    IBEX_ASSERT_OK(a.post_rdma(IBEX_WR_RDMA_READ, 2, 400000, 300000, b.va(200000), ibex_mr_rkey(b.mr)));
    auto wc = a.wait(1);
    ASSERT_EQ(wc.size(), 1u);
    EXPECT_EQ(wc[0].status, IBEX_WC_SUCCESS) << ibex_wc_status_str(wc[0].status);
    EXPECT_EQ(wc[0].opcode, IBEX_WC_RDMA_READ);
    EXPECT_EQ(0, std::memcmp(a.buf.data() + 400000, b.buf.data() + 200000, 300000));

    // Fetch-and-add then compare-and-swap on b's word at offset 8.
    uint64_t init = 100;
    std::memcpy(b.buf.data() + 8, &init, 8);
    IBEX_ASSERT_OK(a.post_atomic(IBEX_WR_ATOMIC_FETCH_AND_ADD, 3, 16, b.va(8), ibex_mr_rkey(b.mr), 5));
    wc = a.wait(1);
    ASSERT_EQ(wc.size(), 1u);
    EXPECT_EQ(wc[0].status, IBEX_WC_SUCCESS);
    uint64_t got;
    std::memcpy(&got, a.buf.data() + 16, 8);
    EXPECT_EQ(got, 100u);
    std::memcpy(&got, b.buf.data() + 8, 8);
    EXPECT_EQ(got, 105u);
    IBEX_ASSERT_OK(a.post_atomic(IBEX_WR_ATOMIC_CMP_AND_SWP, 4, 16, b.va(8), ibex_mr_rkey(b.mr), 105, 7));
    wc = a.wait(1);
    ASSERT_EQ(wc.size(), 1u);
    std::memcpy(&got, b.buf.data() + 8, 8);
    EXPECT_EQ(got, 7u);
    std::memcpy(&got, a.buf.data() + 16, 8);
    EXPECT_EQ(got, 105u);
}

} // namespace

namespace {

// A fenced WRITE waits for the earlier READ of the same bytes, so the READ returns the
// old contents even though its responses are produced from memory as they are sent.
TEST_F(RcInProcess, FenceOrdersWriteAfterRead) {
    constexpr uint32_t kLen = 512 * 1024;
    std::fill(b.buf.begin(), b.buf.begin() + kLen, 0x11);
    std::fill(a.buf.begin() + kLen, a.buf.begin() + 2 * kLen, 0x22);
    ibex_sge_t rd = sge(a, 0, kLen);
    ibex_sge_t wrs = sge(a, kLen, kLen);
    ibex_send_wr_t w[2]{};
    w[0].wr_id = 1;
    w[0].sg_list = &rd;
    w[0].num_sge = 1;
    w[0].opcode = IBEX_WR_RDMA_READ;
    w[0].send_flags = IBEX_SEND_SIGNALED;
    w[0].wr.rdma.remote_addr = b.va(0);
    w[0].wr.rdma.rkey = ibex_mr_rkey(b.mr);
    w[0].next = &w[1];
    w[1].wr_id = 2;
    w[1].sg_list = &wrs;
    w[1].num_sge = 1;
    w[1].opcode = IBEX_WR_RDMA_WRITE;
    w[1].send_flags = IBEX_SEND_SIGNALED | IBEX_SEND_FENCE;
    w[1].wr.rdma.remote_addr = b.va(0);
    w[1].wr.rdma.rkey = ibex_mr_rkey(b.mr);
    IBEX_ASSERT_OK(ibex_post_send(a.qp, w, nullptr));
    auto wc = a.wait(2);
    ASSERT_EQ(wc.size(), 2u);
    EXPECT_EQ(wc[0].wr_id, 1u);
    EXPECT_EQ(wc[1].wr_id, 2u);
    for (uint32_t i = 0; i < kLen; ++i) ASSERT_EQ(a.buf[i], 0x11) << "READ saw the fenced WRITE at byte " << i;
    for (uint32_t i = 0; i < kLen; ++i) ASSERT_EQ(b.buf[i], 0x22) << "WRITE missing at byte " << i;
}

} // namespace

namespace {

double cpu_seconds() {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + double(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

// Progress threads busy-poll only briefly: idle contexts, and an application asleep in
// ibex_cq_wait, leave the CPU to others (four ranks must share two cores).
TEST_F(RcInProcess, IdleContextsBlockInsteadOfSpinning) {
    // Some traffic first, so both progress threads have been busy and must go back to sleep.
    IBEX_ASSERT_OK(a.post_rdma(IBEX_WR_RDMA_WRITE, 1, 0, 65536, b.va(0), ibex_mr_rkey(b.mr)));
    ASSERT_EQ(a.wait(1).size(), 1u);

    const double before = cpu_seconds();
    const auto start = std::chrono::steady_clock::now();
    EXPECT_EQ(ibex_cq_wait(a.cq, 600), IBEX_ERR_TIMEOUT); // nothing will come
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double used = cpu_seconds() - before;
    EXPECT_GE(waited, 0.55);
    // Two progress threads and this thread over 0.6 s: spinning would cost ~1.2 CPU-s.
    EXPECT_LT(used, 0.1) << "idle contexts used " << used << " CPU-seconds in " << waited << " s";
}

// Sleeps (so wake-ups) of this process's progress threads (named ibex-progress); -1 if it
// has none. Preemptions are not counted: under a loaded ctest -j5 they pushed the sum of
// both kinds past the bound below once (157).
long progress_thread_sleeps() {
    long total = -1;
    for (int tid : ibex::test::process_threads())
        if (ibex::test::thread_name(tid) == "ibex-progress") total = (total < 0 ? 0 : total) + ibex::test::thread_sleeps(tid);
    return total;
}

// While the application keeps polling, its context's progress thread stays asleep and looks
// at it less and less often: each look is a wake-up, two context switches on a core the
// application may be spinning on. At one look per IBEX_APP_IDLE_US (1 ms) 0.4 s of polling
// would cost about 400 wake-ups.
TEST_F(RcInProcess, AProgressThreadLooksRarelyAtAnApplicationThatKeepsPolling) {
    IBEX_ASSERT_OK(a.post_rdma(IBEX_WR_RDMA_WRITE, 1, 0, 4096, b.va(0), ibex_mr_rkey(b.mr)));
    ASSERT_EQ(a.wait(1).size(), 1u);
    const long before = progress_thread_sleeps();
    if (before < 0) GTEST_SKIP() << "the test device (" << test_device() << ") runs no progress thread";
    const auto start = std::chrono::steady_clock::now();
    ibex_wc_t wc[4];
    while (std::chrono::steady_clock::now() - start < std::chrono::milliseconds(400)) {
        int n = 0;
        ASSERT_EQ(ibex_poll_cq(a.cq, 4, wc, &n), IBEX_OK);
    }
    const long wakeups = progress_thread_sleeps() - before;
    std::printf("progress threads: %ld wake-ups in 0.4 s of polling\n", wakeups);
    // a's thread: about 0.4 s / 8 ms plus the first few looks; b's, idle: a few.
    EXPECT_LT(wakeups, 150) << "the progress threads kept waking up while the application polled";
}

} // namespace
