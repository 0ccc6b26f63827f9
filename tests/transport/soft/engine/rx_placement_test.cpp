// The receive path checks the ICRC of an in-order WRITE MIDDLE or LAST while it copies the
// payload to its place (responder_placement): a corrupted packet is caught after its bytes
// have landed. These tests corrupt many packets of multi-packet WRITEs and check that no
// byte outside the WRITEs' targets ever changes, that every WRITE lands whole, and that the
// corrupted packets were counted and dropped.
#include <cstring>
#include <vector>

#include "tests/support/endpoint.h"

using namespace ibex::test;

namespace {

constexpr size_t kBuf = 4 << 20;
constexpr size_t kMsg = 64 * 1024; // 16 packets at 4 KiB MTU: one FIRST, 14 MIDDLE, one LAST
constexpr size_t kGap = 4096;      // untouched bytes between targets

uint8_t pattern(size_t i, unsigned round) { return static_cast<uint8_t>(i * 131 + round * 17 + (i >> 9)); }

class RxPlacement : public ::testing::Test {
protected:
    void SetUp() override {
        a.open(kBuf, "udp:lo");
        b.open(kBuf, "udp:lo");
        ASSERT_TRUE(a.ok() && b.ok());
        a.choose_timers(12, 7, 7);
        connect_pair(a, b);
        ibex_fault_config_t f = IBEX_FAULT_CONFIG_INIT;
        f.corrupt = 0.05; // one bit flipped anywhere in about one packet of 20: header or payload
        f.seed = 21;
        IBEX_ASSERT_OK(ibex_set_faults(a.ctx, &f));
    }
    Endpoint a, b;
};

TEST_F(RxPlacement, CorruptedPacketsOfWritesChangeNoByteOutsideTheirTargets) {
    constexpr size_t kTargets = kBuf / (kMsg + kGap);
    std::memset(b.buf.data(), 0xa5, kBuf);
    for (unsigned round = 0; round < 4; ++round) {
        SCOPED_TRACE(testing::Message() << "round " << round);
        for (size_t i = 0; i < kMsg; ++i) a.buf[i] = pattern(i, round);
        // Every other target this round: the rest must keep what they had.
        for (size_t t = round % 2; t < kTargets; t += 2) {
            IBEX_ASSERT_OK(a.post_rdma(IBEX_WR_RDMA_WRITE, t, 0, kMsg, b.va(t * (kMsg + kGap)), ibex_mr_rkey(b.mr)));
            auto wc = a.wait(1, 20000);
            ASSERT_EQ(wc.size(), 1u);
            ASSERT_EQ(wc[0].status, IBEX_WC_SUCCESS) << ibex_wc_status_str(wc[0].status);
        }
        for (size_t t = 0; t < kTargets; ++t) {
            const uint8_t *p = b.buf.data() + t * (kMsg + kGap);
            const bool written_now = t % 2 == round % 2;
            for (size_t i = 0; i < kMsg; ++i) {
                const uint8_t want = written_now ? pattern(i, round) : round ? pattern(i, round - 1) : 0xa5;
                ASSERT_EQ(p[i], want) << "target " << t << " byte " << i;
            }
            for (size_t i = kMsg; i < kMsg + kGap && p + i < b.buf.data() + kBuf; ++i)
                ASSERT_EQ(p[i], 0xa5) << "gap after target " << t << " byte " << i - kMsg;
        }
    }
    EXPECT_GT(b.counters().rx_icrc_errors, 20u) << "the corrupted packets must fail the ICRC check";
}

} // namespace
