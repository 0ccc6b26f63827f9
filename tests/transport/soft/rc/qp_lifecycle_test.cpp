// QP life cycle and edge cases of the RC engine, in one process over loopback: reuse of a
// QP after RESET, reconnect after an error, a full send queue, a CQ overrun, destroying
// QPs with traffic outstanding, zero-length messages, a SEND larger than its receive, and
// many busy QPs on one context.
#include <sys/mman.h>
#include <thread>

#include "tests/transport/soft/rc/manual_qp.h"

using namespace ibex::test;

namespace {

constexpr size_t kBuf = 1 << 20;

class QpLifecycle : public ::testing::Test {
protected:
    void SetUp() override {
        a.open(kBuf);
        b.open(kBuf);
        ASSERT_TRUE(a.ok() && b.ok());
    }
    // Reopens `a` with other settings (open_a). Over memif the two contexts are server and
    // client of one socket, and DPDK 22.11's memif keeps one socket object per path and
    // process, so a server reopened beside its client is never reached by it: there both
    // ends are reopened, `a` first so that it serves the socket again.
    template <class OpenA> void reopen_a(OpenA &&open_a) {
        const bool both = !test_device_reopens();
        if (both) b.close();
        a.close();
        open_a();
        if (both) b.open(kBuf);
        ASSERT_TRUE(a.ok() && b.ok());
    }
    // Reconnects `a` with a 16-packet window, so a 1 MiB transfer takes many round trips,
    // and registers a fresh 1 MiB mapping on `b` filled with `fill` for it to target.
    void slow_pair_with_region(uint32_t psn, uint8_t fill) {
        reopen_a([&] {
            setenv("IBEX_MAX_INFLIGHT", "16", 1);
            a.open(kBuf);
            unsetenv("IBEX_MAX_INFLIGHT");
        });
        if (HasFatalFailure()) return;
        // A second attempt finds b connected to the first `a`: start it afresh too.
        IBEX_ASSERT_OK(to_state(b.qp, IBEX_QPS_RESET));
        connect_at(a, b, psn);
        mem = mmap(nullptr, kRegionLen, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        ASSERT_NE(mem, MAP_FAILED);
        std::memset(mem, fill, kRegionLen);
        IBEX_ASSERT_OK(ibex_reg_mr(b.pd, mem, kRegionLen, kAllAccess, &region));
    }
    // Waits until `first` shows `want` (the transfer is under way), then deregisters the
    // region, makes its pages inaccessible and expects the WR to fail with REM_ACCESS_ERR.
    // False when there was nothing to judge: `last` shows that the whole transfer had landed
    // before the region went (the host descheduled this thread for the whole transfer), and
    // the WR succeeded; the caller tries again.
    bool pull_region_mid_transfer(const uint8_t *first, const uint8_t *last, uint8_t want, const char *what) {
        const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(5);
        while (*reinterpret_cast<const volatile uint8_t *>(first) != want && std::chrono::steady_clock::now() < end) {
        }
        EXPECT_EQ(*reinterpret_cast<const volatile uint8_t *>(first), want) << what << " never started";
        EXPECT_EQ(ibex_dereg_mr(region), IBEX_OK) << ibex_last_error();
        const bool landed = *reinterpret_cast<const volatile uint8_t *>(last) == want;
        EXPECT_EQ(mprotect(mem, kRegionLen, PROT_NONE), 0);
        auto wc = a.wait(1);
        munmap(mem, kRegionLen);
        if (wc.size() == 1 && wc[0].status == IBEX_WC_SUCCESS && landed) return false;
        EXPECT_EQ(wc.size(), 1u);
        if (wc.size() == 1) {
            EXPECT_EQ(wc[0].status, IBEX_WC_REM_ACCESS_ERR) << ibex_wc_status_str(wc[0].status);
        }
        return true;
    }
    static constexpr int kPullAttempts = 4;
    static constexpr size_t kRegionLen = 1 << 20;
    void *mem = nullptr;
    ibex_mr_t *region = nullptr;

    void writes_ok(uint32_t n, uint32_t len, uint32_t seed, uint64_t first_id = 0) {
        fill_bytes(a.buf, 0, size_t(n) * len, seed);
        for (uint32_t i = 0; i < n; ++i)
            IBEX_ASSERT_OK(a.post_rdma(IBEX_WR_RDMA_WRITE, first_id + i, size_t(i) * len, len, b.va(size_t(i) * len),
                                       ibex_mr_rkey(b.mr)));
        expect_in_order_success(a.wait(n), n, first_id);
        ASSERT_EQ(0, std::memcmp(a.buf.data(), b.buf.data(), size_t(n) * len));
    }
    void set_faults(Endpoint &e, double loss, uint64_t seed) {
        ibex_fault_config_t f = IBEX_FAULT_CONFIG_INIT;
        f.loss = loss;
        f.seed = seed;
        IBEX_ASSERT_OK(ibex_set_faults(e.ctx, &f));
    }
    Endpoint a, b;
};

// RTS -> ERR -> RESET -> INIT -> RTR -> RTS, both sides, with new PSNs: traffic again,
// including a READ and an atomic, and no state of the first connection leaks into it.
TEST_F(QpLifecycle, ResetAndReconnectCarriesTrafficAgain) {
    connect_at(a, b, 0x123456);
    writes_ok(8, 10000, 1);
    for (auto *e : {&a, &b}) {
        IBEX_ASSERT_OK(to_state(e->qp, IBEX_QPS_ERR));
        IBEX_ASSERT_OK(to_state(e->qp, IBEX_QPS_RESET));
        EXPECT_EQ(e->qp_state(), IBEX_QPS_RESET);
    }
    EXPECT_EQ(a.post_rdma(IBEX_WR_RDMA_WRITE, 9, 0, 8, b.va(0), ibex_mr_rkey(b.mr)), IBEX_ERR_INVALID_STATE);
    connect_at(a, b, 0xfffff8); // and across the wrap this time
    writes_ok(8, 10000, 2, 100);
    fill_bytes(b.buf, 500000, 70000, 3);
    IBEX_ASSERT_OK(a.post_rdma(IBEX_WR_RDMA_READ, 200, 600000, 70000, b.va(500000), ibex_mr_rkey(b.mr)));
    IBEX_ASSERT_OK(a.post_atomic(IBEX_WR_ATOMIC_FETCH_AND_ADD, 201, 800000, b.va(900000), ibex_mr_rkey(b.mr), 9));
    expect_in_order_success(a.wait(2), 2, 200);
    EXPECT_EQ(0, std::memcmp(a.buf.data() + 600000, b.buf.data() + 500000, 70000));
    uint64_t v;
    std::memcpy(&v, b.buf.data() + 900000, 8);
    EXPECT_EQ(v, 9u);
}

// A QP that ran into RETRY_EXC_ERR (its peer was not there) is reset and reconnected. The
// requester's go-back-N state of the dead connection must not survive the reset: here the
// first sequence NAK of the new connection must trigger the retransmission at once (a
// stale "already rewound" flag would make it wait for the transport timeout instead).
TEST_F(QpLifecycle, ResetClearsRequesterRecoveryState) {
    if (!injects_faults(a.ctx)) GTEST_SKIP() << test_device() << " loses nothing and injects no faults: no recovery to clear";
    // b stays in RESET: a's requests go nowhere and a times out (timeout 8 = 1 ms).
    {
        BringUp o;
        o.sq_psn = o.rq_psn = 0x1000;
        o.timeout = 8;
        o.retry_cnt = 3;
        IBEX_ASSERT_OK(bring_up(a.qp, b.addr(), o));
    }
    IBEX_ASSERT_OK(a.post_rdma(IBEX_WR_RDMA_WRITE, 1, 0, 5000, b.va(0), ibex_mr_rkey(b.mr)));
    auto wc = a.wait(1, 5000);
    ASSERT_EQ(wc.size(), 1u);
    EXPECT_EQ(wc[0].status, IBEX_WC_RETRY_EXC_ERR) << ibex_wc_status_str(wc[0].status);
    EXPECT_EQ(a.qp_state(), IBEX_QPS_ERR);

    // Reconnect both with a long transport timeout (timeout 19: 2.1 s).
    IBEX_ASSERT_OK(to_state(a.qp, IBEX_QPS_RESET));
    BringUp o;
    o.timeout = 19;
    connect_at(a, b, 0x2000, o);
    const uint64_t timeouts_before = a.counters().local_ack_timeout_err;

    // All 16 packets of a first WRITE are lost, then a clean one-packet WRITE follows,
    // whose arrival beyond the gap draws a sequence NAK for the very first PSN.
    set_faults(a, 1.0, 7);
    fill_bytes(a.buf, 0, 16 * 1024 + 100, 9);
    IBEX_ASSERT_OK(a.post_rdma(IBEX_WR_RDMA_WRITE, 10, 0, 16 * 1024, b.va(0), ibex_mr_rkey(b.mr)));
    const uint64_t lost = a.counters().faults_injected;
    set_faults(a, 0, 0);
    ASSERT_EQ(lost, 16u);
    IBEX_ASSERT_OK(a.post_rdma(IBEX_WR_RDMA_WRITE, 11, 16 * 1024, 100, b.va(16 * 1024), ibex_mr_rkey(b.mr)));
    const auto start = std::chrono::steady_clock::now();
    wc = a.wait(2, 5000);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    expect_in_order_success(wc, 2, 10);
    EXPECT_EQ(0, std::memcmp(a.buf.data(), b.buf.data(), 16 * 1024 + 100));
    EXPECT_EQ(a.counters().local_ack_timeout_err, timeouts_before) << "recovered by timeout, not by the NAK";
    EXPECT_LT(secs, 1.0);
}

// RESET in the middle of a connection with unacknowledged requests on the responder: the
// responder's ACK bookkeeping starts afresh too (a stale ACK or count would acknowledge a
// PSN of the old connection).
TEST_F(QpLifecycle, ResetWithTrafficInFlightThenReuse) {
    connect_at(a, b, 0x777);
    fill_bytes(a.buf, 0, 512 * 1024, 4);
    for (uint32_t i = 0; i < 8; ++i)
        IBEX_ASSERT_OK(a.post_rdma(IBEX_WR_RDMA_WRITE, i, i * 65536, 65536, b.va(i * 65536), ibex_mr_rkey(b.mr)));
    // No waiting: reset both ends while packets are in flight.
    IBEX_ASSERT_OK(to_state(b.qp, IBEX_QPS_RESET));
    IBEX_ASSERT_OK(to_state(a.qp, IBEX_QPS_RESET));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    a.wait(64, 50); // whatever was flushed or completed before the reset
    b.wait(64, 50);
    connect_at(a, b, 0x999);
    std::fill(b.buf.begin(), b.buf.end(), 0);
    writes_ok(16, 30000, 5, 1000);
    EXPECT_TRUE(a.wait(1, 100).empty()) << "a completion of the old connection surfaced";
}

TEST_F(QpLifecycle, SendQueueFullReturnsQueueFullAndLosesNothing) {
    reopen_a([&] {
        a.max_send_wr = 16;
        a.open(kBuf);
    });
    if (HasFatalFailure()) return;
    connect_at(a, b, 0x10);
    // The peer is slowed by loss so the queue fills; post 64 WRs one at a time.
    fill_bytes(a.buf, 0, 64 * 4096, 6);
    std::vector<ibex_wc_t> done;
    uint32_t posted = 0, full = 0;
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (posted < 64 && std::chrono::steady_clock::now() < end) {
        ibex_status_t st =
            a.post_rdma(IBEX_WR_RDMA_WRITE, posted, posted * 4096, 4096, b.va(posted * 4096), ibex_mr_rkey(b.mr));
        if (st == IBEX_OK) {
            ++posted;
            continue;
        }
        ASSERT_EQ(st, IBEX_ERR_QUEUE_FULL) << ibex_last_error();
        ++full;
        auto got = a.wait(1, 1000);
        done.insert(done.end(), got.begin(), got.end());
    }
    ASSERT_EQ(posted, 64u);
    // shm completes a WRITE it can copy itself (nothing in flight before it) inside
    // ibex_post_send, so this queue never fills there; the chained post below fills it.
    if (kTestDevice != "shm") {
        EXPECT_GT(full, 0u) << "never saw the queue full";
    }
    auto rest = a.wait(64 - done.size());
    done.insert(done.end(), rest.begin(), rest.end());
    expect_in_order_success(done, 64);
    EXPECT_EQ(0, std::memcmp(a.buf.data(), b.buf.data(), 64 * 4096));

    // A chained post of 20 WRs: 16 accepted, bad_wr names the 17th.
    ibex_sge_t s = sge(a, 0, 64);
    std::vector<ibex_send_wr_t> wrs(20);
    for (size_t i = 0; i < wrs.size(); ++i) {
        wrs[i].wr_id = 500 + i;
        wrs[i].sg_list = &s;
        wrs[i].num_sge = 1;
        wrs[i].opcode = IBEX_WR_RDMA_WRITE;
        wrs[i].send_flags = IBEX_SEND_SIGNALED;
        wrs[i].wr.rdma.remote_addr = b.va(0);
        wrs[i].wr.rdma.rkey = ibex_mr_rkey(b.mr);
        wrs[i].next = i + 1 < wrs.size() ? &wrs[i + 1] : nullptr;
    }
    // Make sure nothing can complete in between: the peer drops everything meanwhile.
    IBEX_ASSERT_OK(to_state(b.qp, IBEX_QPS_RESET));
    ibex_send_wr_t *bad = nullptr;
    EXPECT_EQ(ibex_post_send(a.qp, wrs.data(), &bad), IBEX_ERR_QUEUE_FULL);
    EXPECT_EQ(bad, &wrs[16]);
    // The 16 accepted WRs are flushed, in order, when the QP goes to ERR.
    IBEX_ASSERT_OK(to_state(a.qp, IBEX_QPS_ERR));
    auto fl = a.wait(16, 2000);
    ASSERT_EQ(fl.size(), 16u);
    for (size_t i = 0; i < fl.size(); ++i) {
        EXPECT_EQ(fl[i].wr_id, 500 + i);
        EXPECT_EQ(fl[i].status, IBEX_WC_WR_FLUSH_ERR);
    }
}

TEST_F(QpLifecycle, CqOverrunDropsCompletionsWithoutCrashing) {
    reopen_a([&] { a.open(kBuf, test_device(), 4); }); // a CQ of 4 entries
    if (HasFatalFailure()) return;
    connect_at(a, b, 0x42);
    testing::internal::CaptureStderr();
    fill_bytes(a.buf, 0, 32 * 1000, 7);
    for (uint32_t i = 0; i < 32; ++i)
        IBEX_ASSERT_OK(a.post_rdma(IBEX_WR_RDMA_WRITE, i, i * 1000, 1000, b.va(i * 1000), ibex_mr_rkey(b.mr)));
    // Let everything complete without polling a's CQ (b's side is driven by its thread).
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (std::memcmp(a.buf.data(), b.buf.data(), 32 * 1000) != 0 && std::chrono::steady_clock::now() < end)
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    auto wc = a.wait(4, 1000);
    const std::string err = testing::internal::GetCapturedStderr();
    EXPECT_EQ(0, std::memcmp(a.buf.data(), b.buf.data(), 32 * 1000));
    ASSERT_EQ(wc.size(), 4u);
    for (size_t i = 0; i < wc.size(); ++i) EXPECT_EQ(wc[i].wr_id, i); // the oldest are kept
    EXPECT_NE(err.find("overrun"), std::string::npos) << "stderr: " << err;
    // The QP still works once the application keeps up.
    std::fill(b.buf.begin(), b.buf.end(), 0);
    for (uint32_t i = 0; i < 3; ++i)
        IBEX_ASSERT_OK(a.post_rdma(IBEX_WR_RDMA_WRITE, 100 + i, i * 1000, 1000, b.va(i * 1000), ibex_mr_rkey(b.mr)));
    expect_in_order_success(a.wait(3), 3, 100);
}

// Destroying QPs (and their CQs, MRs) while large WRITEs, READs and atomics are in flight
// both ways, with the peer's progress thread still answering. Under ASan this catches any
// use of a freed QP by the engine.
TEST_F(QpLifecycle, DestroyWithTrafficOutstanding) {
    connect_at(a, b, 0xfffff0);
    for (int round = 0; round < 3; ++round) {
        for (uint32_t i = 0; i < 8; ++i) {
            IBEX_ASSERT_OK(a.post_rdma(IBEX_WR_RDMA_WRITE, i, i * 65536, 65536, b.va(i * 65536), ibex_mr_rkey(b.mr)));
            IBEX_ASSERT_OK(b.post_rdma(IBEX_WR_RDMA_READ, i, i * 65536, 65536, a.va(i * 65536), ibex_mr_rkey(a.mr)));
            IBEX_ASSERT_OK(a.post_atomic(IBEX_WR_ATOMIC_FETCH_AND_ADD, 100 + i, 900000, b.va(900008), ibex_mr_rkey(b.mr), 1));
        }
        if (round == 0) {
            // The requester goes first: its peer keeps answering a QP that is gone.
            ASSERT_EQ(ibex_destroy_qp(a.qp), IBEX_OK);
            a.qp = nullptr;
            std::this_thread::sleep_for(std::chrono::milliseconds(30));
            ASSERT_EQ(ibex_destroy_qp(b.qp), IBEX_OK);
            b.qp = nullptr;
        } else {
            ASSERT_EQ(ibex_destroy_qp(b.qp), IBEX_OK);
            b.qp = nullptr;
            ASSERT_EQ(ibex_destroy_qp(a.qp), IBEX_OK);
            a.qp = nullptr;
        }
        // New QPs on the same CQs (a QPN may be reused) and the same MRs.
        for (auto *e : {&a, &b}) {
            ibex_qp_init_attr_t at = IBEX_QP_INIT_ATTR_INIT;
            at.send_cq = e->cq;
            at.recv_cq = e->cq;
            IBEX_ASSERT_OK(ibex_create_qp(e->pd, &at, &e->qp));
        }
        a.wait(1000, 30);
        b.wait(1000, 30);
        connect_at(a, b, 0xfffff0 + round);
    }
    std::fill(b.buf.begin(), b.buf.end(), 0);
    writes_ok(4, 20000, 8, 7000);
    // Last: destroy everything with traffic outstanding, contexts included.
    for (uint32_t i = 0; i < 8; ++i)
        IBEX_ASSERT_OK(a.post_rdma(IBEX_WR_RDMA_WRITE, i, i * 65536, 65536, b.va(i * 65536), ibex_mr_rkey(b.mr)));
    a.close();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    b.close();
}

TEST_F(QpLifecycle, ZeroLengthReadWriteSend) {
    connect_at(a, b, 0xfffffe);
    std::fill(b.buf.begin(), b.buf.end(), 0x5a);
    std::fill(a.buf.begin(), a.buf.end(), 0xa5);
    IBEX_ASSERT_OK(b.post_recv(50, 0, 0));
    IBEX_ASSERT_OK(b.post_recv(51, 0, 16));
    IBEX_ASSERT_OK(a.post_rdma(IBEX_WR_RDMA_WRITE, 0, 0, 0, b.va(0), ibex_mr_rkey(b.mr)));
    IBEX_ASSERT_OK(a.post_rdma(IBEX_WR_RDMA_READ, 1, 0, 0, b.va(0), ibex_mr_rkey(b.mr)));
    IBEX_ASSERT_OK(a.post_rdma(IBEX_WR_SEND, 2, 0, 0, 0, 0));
    IBEX_ASSERT_OK(a.post_rdma(IBEX_WR_SEND_WITH_IMM, 3, 0, 0, 0, 0, true, 0xfeed));
    // Zero-length WRITE and READ with a bogus rkey: no memory is accessed, so no check.
    IBEX_ASSERT_OK(a.post_rdma(IBEX_WR_RDMA_WRITE, 4, 0, 0, 0, 0xdead));
    IBEX_ASSERT_OK(a.post_rdma(IBEX_WR_RDMA_READ, 5, 0, 0, 0, 0xdead));
    auto wc = a.wait(6);
    expect_in_order_success(wc, 6);
    for (auto &w : wc) EXPECT_EQ(w.byte_len, 0u);
    auto rc = b.wait(2);
    expect_in_order_success(rc, 2, 50);
    for (auto &w : rc) EXPECT_EQ(w.byte_len, 0u);
    EXPECT_EQ(rc[1].imm_data, 0xfeedu);
    for (size_t i = 0; i < kBuf; ++i) ASSERT_EQ(b.buf[i], 0x5a);
    for (size_t i = 0; i < kBuf; ++i) ASSERT_EQ(a.buf[i], 0xa5);
    // The QPs are still fine.
    writes_ok(2, 3000, 9, 10);
}

TEST_F(QpLifecycle, SendLargerThanReceiveFailsBothSides) {
    connect_at(a, b, 0xfffffc);
    IBEX_ASSERT_OK(b.post_recv(70, 0, 3000));
    IBEX_ASSERT_OK(b.post_recv(71, 4096, 3000));
    fill_bytes(a.buf, 0, 5000, 10);
    IBEX_ASSERT_OK(a.post_rdma(IBEX_WR_SEND, 1, 0, 5000, 0, 0)); // 5 packets into 3000 bytes
    IBEX_ASSERT_OK(a.post_rdma(IBEX_WR_SEND, 2, 0, 100, 0, 0));
    auto wc = a.wait(2);
    ASSERT_EQ(wc.size(), 2u);
    EXPECT_EQ(wc[0].wr_id, 1u);
    EXPECT_EQ(wc[0].status, IBEX_WC_REM_INV_REQ_ERR) << ibex_wc_status_str(wc[0].status);
    EXPECT_EQ(wc[1].wr_id, 2u);
    EXPECT_EQ(wc[1].status, IBEX_WC_WR_FLUSH_ERR) << ibex_wc_status_str(wc[1].status);
    auto rc = b.wait(2);
    ASSERT_EQ(rc.size(), 2u);
    EXPECT_EQ(rc[0].wr_id, 70u);
    EXPECT_EQ(rc[0].status, IBEX_WC_LOC_LEN_ERR) << ibex_wc_status_str(rc[0].status);
    EXPECT_EQ(rc[1].wr_id, 71u);
    EXPECT_EQ(rc[1].status, IBEX_WC_WR_FLUSH_ERR);
    EXPECT_EQ(a.qp_state(), IBEX_QPS_ERR);
    EXPECT_EQ(b.qp_state(), IBEX_QPS_ERR);
    // Nothing beyond the receive buffer was written.
    for (size_t i = 3000; i < 4096; ++i) ASSERT_EQ(b.buf[i], 0) << i;
}

// The target deregisters its region while a long WRITE into it is being placed (and then
// makes the pages inaccessible, as freeing them could): the rest of the message must not
// touch the memory. As on an RNIC, the requester gets REM_ACCESS_ERR.
TEST_F(QpLifecycle, DeregisteredTargetIsNotTouchedByTheRestOfAWrite) {
    // MTU 1024 and a window of 16 packets: the 1,024 packets take 64 round trips, so the
    // region goes away while most of the message is still to come.
    for (int attempt = 0; attempt < kPullAttempts; ++attempt) {
        slow_pair_with_region(0x500 + attempt * 0x10000, 0);
        if (HasFatalFailure()) return;
        std::fill(a.buf.begin(), a.buf.end(), 0x77);
        IBEX_ASSERT_OK(a.post_rdma(IBEX_WR_RDMA_WRITE, 1, 0, kRegionLen, reinterpret_cast<uintptr_t>(mem), ibex_mr_rkey(region)));
        const auto *target = static_cast<const uint8_t *>(mem);
        if (pull_region_mid_transfer(target, target + kRegionLen - 1, 0x77, "the WRITE")) return;
    }
    GTEST_SKIP() << "in " << kPullAttempts << " tries the whole WRITE landed before the region could be pulled "
                 << "(this host descheduled the test thread each time): nothing to judge";
}

// The same for READ responses still queued when the source region goes away.
TEST_F(QpLifecycle, DeregisteredSourceIsNotReadByQueuedResponses) {
    for (int attempt = 0; attempt < kPullAttempts; ++attempt) {
        slow_pair_with_region(0x600 + attempt * 0x10000, 0x66);
        if (HasFatalFailure()) return;
        std::fill(a.buf.begin(), a.buf.end(), 0);
        IBEX_ASSERT_OK(a.post_rdma(IBEX_WR_RDMA_READ, 1, 0, kRegionLen, reinterpret_cast<uintptr_t>(mem), ibex_mr_rkey(region)));
        if (pull_region_mid_transfer(a.buf.data(), a.buf.data() + kRegionLen - 1, 0x66, "the READ")) return;
    }
    GTEST_SKIP() << "in " << kPullAttempts << " tries the whole READ was answered before the region could be pulled "
                 << "(this host descheduled the test thread each time): nothing to judge";
}

// 64 QPs on each of two contexts, pairwise connected, all WRITE, READ and SEND at once;
// each QP's data goes to and comes from its own region only.
TEST(QpMany, SixtyFourBusyQpsOnOneContext) {
    constexpr int kQps = 64;
    constexpr uint32_t kRegion = 64 * 1024, kMsg = 12 * 1024;
    Endpoint a, b;
    a.max_send_wr = b.max_send_wr = 64;
    a.max_recv_wr = b.max_recv_wr = 64;
    a.open(size_t(kQps) * kRegion, test_device(), 8192);
    b.open(size_t(kQps) * kRegion, test_device(), 8192);
    ASSERT_TRUE(a.ok() && b.ok());
    std::vector<ibex_qp_t *> qa(kQps), qb(kQps);
    qa[0] = a.qp;
    qb[0] = b.qp;
    for (int i = 1; i < kQps; ++i) {
        for (auto [e, v] : {std::pair{&a, &qa}, std::pair{&b, &qb}}) {
            ibex_qp_init_attr_t at = IBEX_QP_INIT_ATTR_INIT;
            at.send_cq = e->cq;
            at.recv_cq = e->cq;
            at.max_send_wr = 64;
            at.max_recv_wr = 64;
            IBEX_ASSERT_OK(ibex_create_qp(e->pd, &at, &(*v)[i]));
        }
    }
    for (int i = 0; i < kQps; ++i) {
        ibex_ep_addr_t aa{}, ba{};
        IBEX_ASSERT_OK(ibex_qp_local_addr(qa[i], &aa));
        IBEX_ASSERT_OK(ibex_qp_local_addr(qb[i], &ba));
        BringUp o;
        o.sq_psn = o.rq_psn = 0xffffff - i; // every QP crosses the wrap, at a different point
        // The default 67 ms timeout: 1,600 packets leave at once, and a slow (sanitizer)
        // build needs longer than a few ms to answer them all; a shorter timeout makes
        // every QP retransmit its window, which only adds to the backlog.
        o.timeout = 14;
        IBEX_ASSERT_OK(bring_up(qa[i], ba, o));
        IBEX_ASSERT_OK(bring_up(qb[i], aa, o));
    }
    // Region i: [0, kMsg) WRITE source/target, [kMsg, 2kMsg) READ, [2kMsg, 3kMsg) SEND.
    for (int i = 0; i < kQps; ++i) {
        const size_t r = size_t(i) * kRegion;
        fill_bytes(a.buf, r, kMsg, 100 + i);
        fill_bytes(b.buf, r + kMsg, kMsg, 200 + i);
        fill_bytes(a.buf, r + 2 * kMsg, kMsg, 300 + i);
        ibex_sge_t rs = sge(b, r + 2 * kMsg, kMsg);
        ibex_recv_wr_t rw{};
        rw.wr_id = uint64_t(i) << 8;
        rw.sg_list = &rs;
        rw.num_sge = 1;
        IBEX_ASSERT_OK(ibex_post_recv(qb[i], &rw, nullptr));
    }
    for (int i = 0; i < kQps; ++i) {
        const size_t r = size_t(i) * kRegion;
        ibex_sge_t s[3] = {sge(a, r, kMsg), sge(a, r + kMsg, kMsg), sge(a, r + 2 * kMsg, kMsg)};
        ibex_send_wr_t w[3]{};
        for (int k = 0; k < 3; ++k) {
            w[k].wr_id = (uint64_t(i) << 8) | k;
            w[k].sg_list = &s[k];
            w[k].num_sge = 1;
            w[k].send_flags = IBEX_SEND_SIGNALED;
            w[k].next = k < 2 ? &w[k + 1] : nullptr;
        }
        w[0].opcode = IBEX_WR_RDMA_WRITE;
        w[0].wr.rdma = {b.va(r), ibex_mr_rkey(b.mr)};
        w[1].opcode = IBEX_WR_RDMA_READ;
        w[1].wr.rdma = {b.va(r + kMsg), ibex_mr_rkey(b.mr)};
        w[2].opcode = IBEX_WR_SEND;
        IBEX_ASSERT_OK(ibex_post_send(qa[i], w, nullptr));
    }
    auto wc = a.wait(3 * kQps, 20000);
    ASSERT_EQ(wc.size(), size_t(3 * kQps));
    std::vector<int> next(kQps, 0);
    const auto ca = a.counters(), cb = b.counters();
    const std::string why = "a: tx " + std::to_string(ca.tx_packets) + " rx " + std::to_string(ca.rx_packets) +
                            " timeouts " + std::to_string(ca.local_ack_timeout_err) + " seq_naks " +
                            std::to_string(ca.packet_seq_err) + " retransmitted " +
                            std::to_string(ca.retransmitted_packets) + "; b: tx " + std::to_string(cb.tx_packets) +
                            " rx " + std::to_string(cb.rx_packets) + " out_of_seq " +
                            std::to_string(cb.out_of_sequence) + " dup " + std::to_string(cb.duplicate_request);
    for (auto &c : wc) {
        ASSERT_EQ(c.status, IBEX_WC_SUCCESS) << ibex_wc_status_str(c.status) << " QP " << (c.wr_id >> 8) << " " << why;
        const int q = int(c.wr_id >> 8);
        ASSERT_LT(q, kQps);
        EXPECT_EQ(c.qp_num, ibex_qp_num(qa[q]));
        EXPECT_EQ(int(c.wr_id & 0xff), next[q]++) << "QP " << q << " completed out of order";
    }
    auto rc = b.wait(kQps, 10000);
    ASSERT_EQ(rc.size(), size_t(kQps));
    for (auto &c : rc) {
        ASSERT_EQ(c.status, IBEX_WC_SUCCESS);
        EXPECT_EQ(c.qp_num, ibex_qp_num(qb[c.wr_id >> 8]));
        EXPECT_EQ(c.byte_len, kMsg);
    }
    for (int i = 0; i < kQps; ++i) {
        const size_t r = size_t(i) * kRegion;
        ASSERT_EQ(0, std::memcmp(a.buf.data() + r, b.buf.data() + r, 3 * kMsg)) << "QP " << i;
        for (size_t k = r + 3 * kMsg; k < r + kRegion; ++k) ASSERT_EQ(b.buf[k], 0) << "QP " << i << " byte " << k;
    }
    for (int i = 1; i < kQps; ++i) {
        EXPECT_EQ(ibex_destroy_qp(qa[i]), IBEX_OK);
        EXPECT_EQ(ibex_destroy_qp(qb[i]), IBEX_OK);
    }
}

} // namespace
