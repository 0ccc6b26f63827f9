// The requester asks for an acknowledgement whenever its window closes, not only every
// IBEX_ACK_REQ_EVERY packets of a message: a responder acknowledges only what asks, so a
// window that ends between two periodic AckReqs would leave its tail unacknowledged until
// the transport timer fires, and the QP would move one window per timeout. Congestion
// control can shrink a window below the AckReq interval at any time (after a timeout it
// does); here both are set so from the start.
#include <cstdlib>
#include <string>

#include "tests/support/endpoint.h"

using namespace ibex::test;

namespace {

// Sets an environment variable for the contexts a test opens, and restores it after.
class ScopedEnv {
public:
    ScopedEnv(const char *name, const char *value) : name_(name) {
        if (const char *v = std::getenv(name)) saved_ = v, had_ = true;
        setenv(name, value, 1);
    }
    ~ScopedEnv() {
        if (had_)
            setenv(name_.c_str(), saved_.c_str(), 1);
        else
            unsetenv(name_.c_str());
    }

private:
    std::string name_, saved_;
    bool had_ = false;
};

TEST(AckRequest, AWindowSmallerThanTheAckIntervalNeverWaitsForTheTimer) {
    if (!test_device_injects_faults()) GTEST_SKIP() << "shm has no send window or transport timer";
    const ScopedEnv window("IBEX_MAX_INFLIGHT", "8"), every("IBEX_ACK_REQ_EVERY", "32");
    Endpoint a, b;
    constexpr uint32_t kMsg = 1 << 20;
    a.open(kMsg);
    b.open(kMsg);
    connect_pair(a, b);
    IBEX_ASSERT_OK(a.set_timers(14, 7, 7)); // 67 ms: waiting for it 16+ times would show
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

} // namespace
