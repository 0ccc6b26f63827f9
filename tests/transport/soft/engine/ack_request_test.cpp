// Acknowledgements. The requester asks for one whenever its window closes, not only every
// IBEX_ACK_REQ_EVERY packets of a message: a responder acknowledges only what asks, so a
// window that ends between two periodic AckReqs would leave its tail unacknowledged until
// the transport timer fires, and the QP would move one window per timeout. Congestion
// control can shrink a window below the AckReq interval at any time (after a timeout it
// does); here both are set so from the start. And the responder delays plain ACKs
// (IBEX_ACK_DELAY_US) so that one covers several requests of a ping-pong.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "tests/support/endpoint.h"
#include "tests/support/scoped_env.h"

using namespace ibex::test;

namespace {

TEST(AckRequest, AWindowSmallerThanTheAckIntervalNeverWaitsForTheTimer) {
    if (!test_device_injects_faults()) GTEST_SKIP() << "shm has no send window or transport timer";
    const ScopedEnv window("IBEX_MAX_INFLIGHT", "8"), every("IBEX_ACK_REQ_EVERY", "32");
    Endpoint a, b;
    constexpr uint32_t kMsg = 1 << 20;
    a.open(kMsg);
    b.open(kMsg);
    a.choose_timers(14, 7, 7); // 67 ms: waiting for it 16+ times would show
    connect_pair(a, b);
    for (uint32_t k = 0; k < kMsg; ++k) a.buf[k] = static_cast<uint8_t>(k * 13 + 5);
    constexpr int kWrites = 4;
    for (int i = 0; i < kWrites; ++i)
        IBEX_ASSERT_OK(a.post_rdma(IBEX_WR_RDMA_WRITE, uint64_t(i), 0, kMsg, b.va(0), ibex_mr_rkey(b.mr)));
    const auto wc = a.wait(kWrites, 60000);
    ASSERT_EQ(wc.size(), size_t(kWrites));
    for (const auto &c : wc) ASSERT_EQ(c.status, IBEX_WC_SUCCESS) << ibex_wc_status_str(c.status);
    for (uint32_t k = 0; k < kMsg; k += 61) ASSERT_EQ(b.buf[k], static_cast<uint8_t>(k * 13 + 5)) << k;
    const ibex_counters_t ca = a.counters();
    EXPECT_EQ(ca.local_ack_timeout_err, 0u) << "the window's last packet did not ask for an acknowledgement";
    EXPECT_EQ(ca.retransmitted_packets, 0u);
}

// A WRITE ping-pong of kRounds messages each way; returns how many ACKs b sent (its
// packets beyond its own WRITEs), after every WRITE of a has completed. a_signaled false:
// a's WRITEs are unsignaled but for the last, as a sender that only needs its buffers back
// now and then posts them.
uint64_t ping_pong_acks_from_b(bool a_signaled = true) {
    constexpr int kRounds = 200;
    Endpoint a, b;
    a.open(4096);
    b.open(4096);
    connect_pair(a, b);
    const uint64_t before = b.counters().tx_packets;
    volatile uint8_t *at_a = a.buf.data(), *at_b = b.buf.data();
    for (int i = 1; i <= kRounds; ++i) {
        a.buf[64] = static_cast<uint8_t>(i);
        EXPECT_EQ(a.post_rdma(IBEX_WR_RDMA_WRITE, uint64_t(i), 64, 1, b.va(0), ibex_mr_rkey(b.mr),
                              a_signaled || i == kRounds),
                  IBEX_OK);
        for (int spin = 0; at_b[0] != static_cast<uint8_t>(i) && spin < 10000000; ++spin) ibex_progress(b.ctx);
        b.buf[64] = static_cast<uint8_t>(i);
        EXPECT_EQ(b.post_rdma(IBEX_WR_RDMA_WRITE, uint64_t(i), 64, 1, a.va(0), ibex_mr_rkey(a.mr)), IBEX_OK);
        for (int spin = 0; at_a[0] != static_cast<uint8_t>(i) && spin < 10000000; ++spin) ibex_progress(a.ctx);
        if (at_a[0] != static_cast<uint8_t>(i)) {
            ADD_FAILURE() << "round " << i << " never came back";
            return 0;
        }
    }
    // every WRITE of a acknowledged in the end
    EXPECT_EQ(a.wait(a_signaled ? kRounds : 1).size(), size_t(a_signaled ? kRounds : 1));
    EXPECT_EQ(b.wait(kRounds).size(), size_t(kRounds));
    EXPECT_EQ(a.counters().retransmitted_packets, 0u);
    return b.counters().tx_packets - before - kRounds;
}

TEST(AckCoalescing, APingPongAcknowledgesSeveralWritesPerAck) {
    if (!test_device_injects_faults()) GTEST_SKIP() << "shm has no acknowledgements";
    uint64_t at_once, delayed;
    {
        const ScopedEnv off("IBEX_ACK_DELAY_US", "0");
        at_once = ping_pong_acks_from_b();
    }
    {
        // Long enough that only kAckRideMin (4) unacknowledged WRITEs send it, however slow
        // the machine; every completion still arrives (within 5 ms of its WRITE at most).
        const ScopedEnv on("IBEX_ACK_DELAY_US", "5000");
        delayed = ping_pong_acks_from_b();
    }
    std::printf("ACKs for 200 WRITEs: %llu without a delay, %llu with\n", static_cast<unsigned long long>(at_once),
                static_cast<unsigned long long>(delayed));
    EXPECT_GE(at_once, 190u) << "without a delay every WRITE of the ping-pong gets its own ACK";
    EXPECT_LE(delayed, 100u) << "a delayed ACK should cover several WRITEs (" << at_once << " without the delay)";
}

// A WRITE that is not signaled asks for no ACK: nothing waits for its completion, so the
// responder acknowledges it lazily (IBEX_ACK_LAZY_US), in the batch of its own next WRITE
// once several wait. Even with the plain ACK delay off, a ping-pong of unsignaled WRITEs
// then costs a few ACKs instead of one per WRITE.
TEST(AckCoalescing, UnsignaledWritesOfAPingPongRideOnTheReplies) {
    if (!test_device_injects_faults()) GTEST_SKIP() << "shm has no acknowledgements";
    const ScopedEnv off("IBEX_ACK_DELAY_US", "0");
    // Long enough that only the count of waiting WRITEs sends it, however slow the machine.
    const ScopedEnv lazy("IBEX_ACK_LAZY_US", "10000");
    const uint64_t signaled = ping_pong_acks_from_b(true);
    const uint64_t unsignaled = ping_pong_acks_from_b(false);
    std::printf("ACKs for 200 WRITEs: %llu signaled, %llu unsignaled\n", static_cast<unsigned long long>(signaled),
                static_cast<unsigned long long>(unsignaled));
    EXPECT_GE(signaled, 190u) << "with the delay off every signaled WRITE gets its own ACK";
    EXPECT_LE(unsignaled, 30u) << "unsignaled WRITEs should be acknowledged a batch at a time";
}

// A lone unsignaled WRITE, with nothing going back its way, is still acknowledged once the
// lazy delay ends (its requester's send queue needs the slot), and never retransmitted.
TEST(AckRequest, ALoneUnsignaledWriteIsAcknowledgedWhenTheLazyDelayEnds) {
    if (!test_device_injects_faults()) GTEST_SKIP() << "shm has no acknowledgements";
    const ScopedEnv lazy("IBEX_ACK_LAZY_US", "500");
    Endpoint a, b;
    a.open(4096);
    b.open(4096);
    a.choose_timers(14, 7, 7); // 67 ms: a lost or missing ACK would retransmit
    connect_pair(a, b);
    const uint64_t b_before = b.counters().tx_packets, a_before = a.counters().rx_packets;
    a.buf[0] = 0x5a;
    IBEX_ASSERT_OK(a.post_rdma(IBEX_WR_RDMA_WRITE, 1, 0, 1, b.va(0), ibex_mr_rkey(b.mr), false));
    volatile uint8_t *at_b = b.buf.data();
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while ((at_b[0] != 0x5a || b.counters().tx_packets == b_before) && std::chrono::steady_clock::now() < end) {
        ibex_progress(a.ctx);
        ibex_progress(b.ctx);
    }
    ASSERT_EQ(at_b[0], 0x5a) << "the WRITE never landed";
    ASSERT_EQ(b.counters().tx_packets - b_before, 1u) << "b should send exactly one ACK for the WRITE";
    for (int i = 0; i < 1000 && a.counters().rx_packets == a_before; ++i) ibex_progress(a.ctx);
    EXPECT_EQ(a.counters().rx_packets - a_before, 1u) << "a never received the lazy ACK";
    EXPECT_EQ(a.counters().retransmitted_packets, 0u);
    EXPECT_EQ(a.counters().local_ack_timeout_err, 0u);
    // and the QP goes on: a signaled WRITE after it completes
    IBEX_ASSERT_OK(a.post_rdma(IBEX_WR_RDMA_WRITE, 2, 0, 1, b.va(1), ibex_mr_rkey(b.mr)));
    const auto wc = a.wait(1);
    ASSERT_EQ(wc.size(), 1u);
    EXPECT_EQ(wc[0].wr_id, 2u) << "an unsignaled WRITE completed with a CQE";
    EXPECT_EQ(wc[0].status, IBEX_WC_SUCCESS);
}

} // namespace
