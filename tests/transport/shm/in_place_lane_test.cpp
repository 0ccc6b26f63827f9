// The in-place lane (transport/shm/in_place_lane.h): after one WRITE went in place, the
// next ones between the same two regions skip the context lock. What the lane must never
// do is copy where the locked path would refuse: these tests open it, change what it was
// opened under (the target's MR, the peer QP's state, the source's MR, a WQE queued ahead),
// and check that the next WRITE is refused, or waits its turn, with the target untouched.
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "tests/transport/shm/shm_pair.h"
#include "tests/transport/soft/rc/peer.h"

using namespace ibex::test;

namespace {

constexpr size_t kRegion = 4096;

struct LanePair {
    ShmPair p;
    std::unique_ptr<AllocRegion> src, dst;
    LanePair() {
        p.open(4096, nullptr);
        src = std::make_unique<AllocRegion>(p.a.pd, kRegion, kAllAccess);
        dst = std::make_unique<AllocRegion>(p.b.pd, kRegion, kAllAccess);
        std::memset(dst->bytes(), 0x3c, kRegion);
    }
    bool ok() const { return src->ok() && dst->ok(); }

    // One signaled WRITE of `len` bytes at src_off of the source to dst_off of the target.
    ibex_status_t write(uint64_t id, size_t src_off, size_t dst_off, uint32_t len, uint32_t rkey, uint32_t lkey) {
        return post_one_wr(p.a.qp, IBEX_WR_RDMA_WRITE, id, src->at(src_off), len, lkey, dst->at(dst_off), rkey);
    }
    ibex_status_t write(uint64_t id, size_t off, uint32_t len, uint32_t rkey, uint32_t lkey) {
        return write(id, off, off, len, rkey, lkey);
    }
    ibex_status_t write(uint64_t id, size_t off, uint32_t len) {
        return write(id, off, len, ibex_mr_rkey(dst->mr), ibex_mr_lkey(src->mr));
    }
    // The WRITE just posted completed with an error (`want`, or any), the target is as it
    // was, and nothing went through the lane.
    void expect_refused(const char *what, std::optional<ibex_wc_status_t> want = std::nullopt) {
        auto wc = p.a.wait(1);
        ASSERT_EQ(wc.size(), 1u);
        if (want)
            EXPECT_EQ(wc[0].status, *want) << ibex_wc_status_str(wc[0].status);
        else
            EXPECT_NE(wc[0].status, IBEX_WC_SUCCESS) << what;
        expect_untouched(what);
    }
    void expect_untouched(const char *what) {
        EXPECT_EQ(check_const(dst->bytes(), kRegion, 0x3c), 0u) << what;
        EXPECT_EQ(stats(p.a).lane_ops, 0u);
    }
    // Opens the lane: one WRITE in place, completed.
    void open_lane() {
        std::memset(src->bytes(), 0x11, 64);
        ASSERT_EQ(write(1, 0, 64), IBEX_OK) << ibex_last_error();
        auto wc = p.a.wait(1);
        ASSERT_EQ(wc.size(), 1u);
        ASSERT_EQ(wc[0].status, IBEX_WC_SUCCESS) << ibex_wc_status_str(wc[0].status);
        ASSERT_EQ(check_const(dst->bytes(), 64, 0x11), 0u);
        std::memset(dst->bytes(), 0x3c, kRegion);
        ASSERT_EQ(stats(p.a).lane_ops, 0u) << "the first WRITE takes the locked path";
    }
};

// Each test starts with the lane open.
class ShmLane : public ::testing::Test {
protected:
    void SetUp() override {
        ASSERT_TRUE(l.ok());
        ASSERT_NO_FATAL_FAILURE(l.open_lane());
    }
    // Deregisters a region the lane was opened over; its old key (rkey or lkey).
    static uint32_t deregister(AllocRegion &r, bool remote_key) {
        const uint32_t key = remote_key ? ibex_mr_rkey(r.mr) : ibex_mr_lkey(r.mr);
        EXPECT_EQ(ibex_dereg_mr(r.mr), IBEX_OK) << ibex_last_error();
        r.mr = nullptr;
        return key;
    }
    LanePair l;
};

TEST_F(ShmLane, WritesAfterTheFirstSkipTheLockAndLandInOrder) {
    constexpr int kWrites = 50;
    for (int i = 0; i < kWrites; ++i) {
        const size_t off = static_cast<size_t>(i) * 64;
        std::memset(l.src->bytes() + off, 0x40 + i, 64);
        ASSERT_EQ(l.write(100 + static_cast<uint64_t>(i), off, 64), IBEX_OK) << ibex_last_error();
        // Copied before the post returned, as on the locked path.
        ASSERT_EQ(check_const(l.dst->bytes() + off, 64, static_cast<uint8_t>(0x40 + i)), 0u) << i;
    }
    auto wc = l.p.a.wait(kWrites);
    ASSERT_EQ(wc.size(), static_cast<size_t>(kWrites));
    for (int i = 0; i < kWrites; ++i) {
        EXPECT_EQ(wc[static_cast<size_t>(i)].wr_id, 100u + static_cast<uint64_t>(i));
        EXPECT_EQ(wc[static_cast<size_t>(i)].status, IBEX_WC_SUCCESS);
        EXPECT_EQ(wc[static_cast<size_t>(i)].opcode, IBEX_WC_RDMA_WRITE);
        EXPECT_EQ(wc[static_cast<size_t>(i)].byte_len, 64u);
    }
    const auto s = stats(l.p.a);
    EXPECT_EQ(s.lane_ops, static_cast<uint64_t>(kWrites));
    EXPECT_EQ(s.map_ops, static_cast<uint64_t>(kWrites) + 1);
}

// Lane copies of up to 16 bytes are stores of their own (no libc call): every length
// from 1 to 17 lands whole, at any alignment, and not a byte beside it.
TEST_F(ShmLane, SmallWritesOfEveryLengthLandExactly) {
    for (uint32_t len = 1; len <= 17; ++len) {
        for (size_t misalign : {size_t(0), size_t(3)}) {
            SCOPED_TRACE(testing::Message() << len << " bytes at +" << misalign);
            const size_t off = 128 + 64 * len + (misalign ? 32 + misalign : 0);
            for (uint32_t i = 0; i < len; ++i) l.src->bytes()[off + i] = static_cast<uint8_t>(len * 16 + i + 1);
            ASSERT_EQ(l.write(len, off, len), IBEX_OK) << ibex_last_error();
            for (uint32_t i = 0; i < len; ++i)
                ASSERT_EQ(l.dst->bytes()[off + i], static_cast<uint8_t>(len * 16 + i + 1)) << "byte " << i;
            EXPECT_EQ(l.dst->bytes()[off - 1], 0x3c) << "the byte before was written";
            EXPECT_EQ(l.dst->bytes()[off + len], 0x3c) << "the byte after was written";
        }
    }
    EXPECT_EQ(l.p.a.wait(34).size(), 34u);
    EXPECT_EQ(stats(l.p.a).lane_ops, 34u);
}

TEST_F(ShmLane, OutsideEitherRegionTakesTheLockedPathAndItsErrors) {
    // Past the end of the target's MR: the target's answer, memory untouched.
    ASSERT_EQ(l.write(2, 0, kRegion - 32, 64, ibex_mr_rkey(l.dst->mr), ibex_mr_lkey(l.src->mr)), IBEX_OK)
        << ibex_last_error();
    l.expect_refused("target memory changed", IBEX_WC_REM_ACCESS_ERR);
}

TEST_F(ShmLane, OutsideTheSourceRegionIsRefusedAtThePost) {
    EXPECT_EQ(l.write(2, kRegion - 32, 64), IBEX_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(ibex_last_error()).find("outside memory region"), std::string::npos) << ibex_last_error();
    l.expect_untouched("target memory changed");
}

TEST_F(ShmLane, ClosedWhenTheTargetDeregistersItsRegion) {
    const uint32_t old_rkey = deregister(*l.dst, true);
    std::memset(l.src->bytes(), 0x55, 64);
    ASSERT_EQ(l.write(2, 0, 64, old_rkey, ibex_mr_lkey(l.src->mr)), IBEX_OK) << ibex_last_error();
    l.expect_refused("a deregistered region was written", IBEX_WC_REM_ACCESS_ERR);
}

TEST_F(ShmLane, ClosedWhenThePeerQpLeavesReadyToReceive) {
    ibex_qp_attr_t attr = IBEX_QP_ATTR_INIT;
    attr.qp_state = IBEX_QPS_ERR;
    ASSERT_EQ(ibex_modify_qp(l.p.b.qp, &attr, IBEX_QP_STATE), IBEX_OK) << ibex_last_error();
    std::memset(l.src->bytes(), 0x55, 64);
    ASSERT_EQ(l.write(2, 0, 64), IBEX_OK) << ibex_last_error();
    l.expect_refused("a QP in error was written");
}

TEST_F(ShmLane, ClosedWhenTheSourceIsDeregistered) {
    const uint32_t old_lkey = deregister(*l.src, false);
    const ibex_status_t st = l.write(2, 0, 64, ibex_mr_rkey(l.dst->mr), old_lkey);
    // Refused at the post or by a completion: either way nothing copied.
    if (st == IBEX_OK)
        l.expect_refused("copied from a deregistered source");
    else
        l.expect_untouched("copied from a deregistered source");
}

// An atomic is queued for the target to serve; a WRITE to the same 8 bytes posted after
// it must wait its turn, not slip through the lane first: the sum is then overwritten
// (not the WRITE's value added to), and the completions come in posting order.
TEST_F(ShmLane, DoesNotPassAnAtomicQueuedBeforeIt) {
    auto *word = reinterpret_cast<uint64_t *>(l.dst->bytes() + 512);
    auto *value = reinterpret_cast<uint64_t *>(l.src->bytes() + 1024);
    for (uint64_t round = 0; round < 20; ++round) {
        SCOPED_TRACE(round);
        *word = 1000;
        *value = 7000 + round;
        ASSERT_EQ(post_atomic_wr(l.p.a.qp, IBEX_WR_ATOMIC_FETCH_AND_ADD, 10, l.src->at(0), ibex_mr_lkey(l.src->mr),
                                 l.dst->at(512), ibex_mr_rkey(l.dst->mr), 5),
                  IBEX_OK)
            << ibex_last_error();
        ASSERT_EQ(l.write(11, 1024, 512, 8, ibex_mr_rkey(l.dst->mr), ibex_mr_lkey(l.src->mr)), IBEX_OK)
            << ibex_last_error();
        auto wc = l.p.a.wait(2);
        ASSERT_EQ(wc.size(), 2u);
        EXPECT_EQ(wc[0].wr_id, 10u) << "the WRITE completed before the atomic queued ahead of it";
        EXPECT_EQ(wc[1].wr_id, 11u);
        for (auto &w : wc) EXPECT_EQ(w.status, IBEX_WC_SUCCESS) << ibex_wc_status_str(w.status);
        EXPECT_EQ(*reinterpret_cast<uint64_t *>(l.src->bytes()), 1000u) << "the atomic's original value";
        EXPECT_EQ(*word, 7000 + round) << "the atomic ran after the WRITE that followed it";
    }
}

} // namespace
