// Selective (IRN) loss recovery in the engine, two contexts of this process: the per-QP
// counters of ibex_query_qp_retransmit agree with the context's, the mode comes from
// IBEX_RETRANSMIT (and a bad value is refused), and a lost tail is resent after RTO_low
// rather than the transport timeout. The fault suite (tests/transport/soft/rc) covers
// every opcode under loss, reordering, duplication and corruption in both modes.
#include <chrono>
#include <cstdlib>
#include <thread>

#include "tests/support/endpoint.h"

using namespace ibex::test;

namespace {

// Sets IBEX_RETRANSMIT for the contexts a test opens, and restores it after.
class ModeEnv {
public:
    explicit ModeEnv(const char *mode) {
        if (const char *v = std::getenv("IBEX_RETRANSMIT")) saved_ = v, had_ = true;
        setenv("IBEX_RETRANSMIT", mode, 1);
    }
    ~ModeEnv() {
        if (had_)
            setenv("IBEX_RETRANSMIT", saved_.c_str(), 1);
        else
            unsetenv("IBEX_RETRANSMIT");
    }

private:
    std::string saved_;
    bool had_ = false;
};

ibex_qp_retransmit_t query(ibex_qp_t *qp) {
    ibex_qp_retransmit_t r{};
    r.size = sizeof r;
    EXPECT_EQ(ibex_query_qp_retransmit(qp, &r), IBEX_OK) << ibex_last_error();
    return r;
}

// 64 WRITEs of 64 KiB from a to b with 3% loss on a's packets; every byte checked.
void lossy_writes(Endpoint &a, Endpoint &b) {
    ibex_fault_config_t f = IBEX_FAULT_CONFIG_INIT;
    f.loss = 0.03;
    f.seed = 0x1e4;
    IBEX_ASSERT_OK(ibex_set_faults(a.ctx, &f));
    constexpr uint32_t kMsg = 64 * 1024;
    constexpr int kN = 64;
    for (int i = 0; i < kN; ++i) {
        for (uint32_t k = 0; k < kMsg; ++k) a.buf[size_t(i % 8) * kMsg + k] = static_cast<uint8_t>(i * 131 + k * 7);
        IBEX_ASSERT_OK(a.post_rdma(IBEX_WR_RDMA_WRITE, uint64_t(i), size_t(i % 8) * kMsg, kMsg,
                                   b.va(size_t(i) * kMsg), ibex_mr_rkey(b.mr)));
        if (i % 8 == 7) {
            auto wc = a.wait(8);
            ASSERT_EQ(wc.size(), 8u);
            for (auto &c : wc) ASSERT_EQ(c.status, IBEX_WC_SUCCESS) << ibex_wc_status_str(c.status);
        }
    }
    for (int i = 0; i < kN; ++i)
        for (uint32_t k = 0; k < kMsg; k += 97)
            ASSERT_EQ(b.buf[size_t(i) * kMsg + k], static_cast<uint8_t>(i * 131 + k * 7)) << i << " " << k;
    f.loss = 0;
    IBEX_ASSERT_OK(ibex_set_faults(a.ctx, &f));
}

// Two connected endpoints (a's transport timeout 67 ms) after lossy_writes, with each
// side's counters.
struct LossyPair {
    Endpoint a, b;
    ibex_qp_retransmit_t ra{}, rb{};
    void run() {
        a.open(1 << 20);
        b.open(4 << 20);
        a.choose_timers(14, 7, 7);
        connect_pair(a, b);
        lossy_writes(a, b);
        ra = query(a.qp);
        rb = query(b.qp);
    }
};

TEST(RetransmitEngine, SelectiveCountersMatchTheContextsAndShowTheMechanism) {
    ModeEnv env("selective");
    LossyPair p;
    ASSERT_NO_FATAL_FAILURE(p.run());
    Endpoint &a = p.a, &b = p.b;
    const ibex_qp_retransmit_t &ra = p.ra, &rb = p.rb;
    const ibex_counters_t ca = a.counters(), cb = b.counters();
    EXPECT_EQ(ra.mode, uint32_t(IBEX_RETRANSMIT_SELECTIVE));
    EXPECT_GT(ra.inflight_cap, 0u);
    EXPECT_EQ(ra.inflight_cap, rb.ooo_window) << "the in-flight cap is the peer's store";
    EXPECT_GT(rb.ooo_packets_held, 0u) << "what arrived past a hole was held";
    EXPECT_GT(rb.naks_sent, 0u);
    EXPECT_GT(ra.naks_received, 0u);
    EXPECT_GT(ra.packets_resent, 0u);
    // Selective: a few packets resent per loss (the hole, a tail probe, a repeated NAK, a
    // transport timeout on a busy host); go-back-N resends a window (up to 128) per loss.
    EXPECT_LT(ra.packets_resent, 8 * ca.faults_injected + 64) << "resent " << ra.packets_resent << " (tail " << ra.tail_timeouts << ", naks " << ra.naks_received << ", timeouts " << ra.timeouts << ") for "
                                                              << ca.faults_injected << " lost";
    // One QP per context: its counters are the context's.
    EXPECT_EQ(ra.packets_resent, ca.retransmitted_packets);
    EXPECT_EQ(ra.naks_received, ca.packet_seq_err);
    EXPECT_EQ(ra.timeouts, ca.local_ack_timeout_err);
    EXPECT_EQ(ra.tail_timeouts, ca.tail_timeouts);
    EXPECT_EQ(rb.naks_sent, cb.seq_naks_sent);
    EXPECT_EQ(rb.ooo_packets_held, cb.ooo_packets_held);
}

TEST(RetransmitEngine, GoBackNIsTheDefaultAndHoldsNothing) {
    ModeEnv env("gbn");
    unsetenv("IBEX_RETRANSMIT");
    LossyPair p;
    ASSERT_NO_FATAL_FAILURE(p.run());
    const ibex_qp_retransmit_t &ra = p.ra, &rb = p.rb;
    EXPECT_EQ(ra.mode, uint32_t(IBEX_RETRANSMIT_GBN));
    EXPECT_EQ(ra.inflight_cap, 0u);
    EXPECT_EQ(rb.ooo_window, 0u);
    EXPECT_EQ(rb.ooo_packets_held, 0u);
    EXPECT_EQ(ra.tail_timeouts, 0u);
    EXPECT_GT(rb.naks_sent, 0u);
    EXPECT_GT(ra.packets_resent, 0u);
    EXPECT_EQ(rb.naks_sent, p.b.counters().seq_naks_sent);
}

// Selective mode, a's transport timeout 4.3 s (timeout 20): a WRITE of `len` bytes from a
// to b is posted while a loses every packet it sends, and the loss ends 2 ms later. The
// completion (within 3 s, long before the transport timeout) and b's bytes are checked;
// returns a's retransmission counters.
ibex_qp_retransmit_t write_lost_for_two_ms(uint32_t len) {
    Endpoint a, b;
    a.open(1 << 20);
    b.open(1 << 20);
    a.choose_timers(20, 7, 7);
    connect_pair(a, b);
    const ibex_qp_retransmit_t before = query(a.qp);
    EXPECT_GT(before.inflight_cap, 0u);
    ibex_fault_config_t f = IBEX_FAULT_CONFIG_INIT;
    f.loss = 1.0;
    EXPECT_EQ(ibex_set_faults(a.ctx, &f), IBEX_OK);
    for (uint32_t i = 0; i < len; ++i) a.buf[i] = static_cast<uint8_t>(i * 7 + 3);
    EXPECT_EQ(a.post_rdma(IBEX_WR_RDMA_WRITE, 5, 0, len, b.va(0), ibex_mr_rkey(b.mr)), IBEX_OK);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    f.loss = 0;
    EXPECT_EQ(ibex_set_faults(a.ctx, &f), IBEX_OK);
    auto wc = a.wait(1, 3000);
    EXPECT_EQ(wc.size(), 1u) << "the loss was not repaired before the transport timeout";
    if (wc.size() == 1) {
        EXPECT_EQ(wc[0].status, IBEX_WC_SUCCESS);
    }
    EXPECT_EQ(0, std::memcmp(b.buf.data(), a.buf.data(), len));
    return query(a.qp);
}

// The tail (one packet) is lost: RTO_low resends it.
TEST(RetransmitEngine, LostTailIsResentAfterRtoLowNotTheTransportTimeout) {
    ModeEnv env("selective");
    const ibex_qp_retransmit_t r = write_lost_for_two_ms(100);
    EXPECT_GE(r.tail_timeouts, 1u);
    EXPECT_EQ(r.timeouts, 0u);
    EXPECT_GE(r.packets_resent, 1u);
}

// The window is full and everything in it was lost: no later packet reaches the responder
// to make it name the hole, and nothing is acknowledged. The tail timer must still run
// (the requester is stalled, not busy), so its deadline wakes the requester and recovery
// does not wait for the transport timeout. The same holds for a lost resend while the
// window is full. (Before, the timer was off with more than three packets in flight.)
TEST(RetransmitEngine, FullWindowLostWholeIsProbedAfterRtoLowNotTheTransportTimeout) {
    ModeEnv env("selective");
    const uint32_t len = 1 << 20; // 256 packets at MTU 4096: more than the window
    const ibex_qp_retransmit_t r = write_lost_for_two_ms(len);
    EXPECT_GT(len / 4096, r.inflight_cap);
    EXPECT_EQ(r.timeouts, 0u);
    EXPECT_GE(r.packets_resent, 1u);
}

TEST(RetransmitEngine, BadModeAndBadSizeAreRefused) {
    {
        ModeEnv env("sack");
        ibex_context_t *ctx = nullptr;
        EXPECT_EQ(ibex_open_device(test_device(), nullptr, &ctx), IBEX_ERR_INVALID_ARGUMENT);
        EXPECT_NE(std::string(ibex_last_error()).find("IBEX_RETRANSMIT"), std::string::npos) << ibex_last_error();
        if (ctx) ibex_close_device(ctx);
    }
    Endpoint a;
    a.open(1 << 16);
    ibex_qp_retransmit_t r{};
    r.size = sizeof r + 8;
    EXPECT_EQ(ibex_query_qp_retransmit(a.qp, &r), IBEX_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(ibex_query_qp_retransmit(nullptr, &r), IBEX_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(ibex_query_qp_retransmit(a.qp, nullptr), IBEX_ERR_INVALID_ARGUMENT);
    // An older caller's smaller struct gets the fields it knows.
    r = {};
    r.size = offsetof(ibex_qp_retransmit_t, timeouts);
    IBEX_ASSERT_OK(ibex_query_qp_retransmit(a.qp, &r));
    EXPECT_EQ(r.size, offsetof(ibex_qp_retransmit_t, timeouts));
}

} // namespace
