// Remote protection and RNR, between two contexts of this process.
//
// Protection: a bad rkey, an address outside the region (one byte past its end, one byte
// before its start, a range that starts inside and runs out), a stale key of a
// deregistered region, and regions lacking REMOTE_WRITE / REMOTE_READ / REMOTE_ATOMIC.
// The requester's WR completes with REM_ACCESS_ERR, the target memory is byte-for-byte
// unchanged, the requester QP is in ERR and everything behind the bad WR (already posted
// or posted later) completes with WR_FLUSH_ERR; the target counts the access error.
//
// RNR: SEND with no receive posted and a small rnr_retry ends in RNR_RETRY_EXC_ERR; with
// rnr_retry 7 (infinite) a receive posted late lets it succeed.
#include <algorithm>
#include <thread>

#include "tests/transport/soft/rc/peer.h"

using namespace ibex::test;

namespace {

constexpr size_t kLen = 1 << 20;

enum class Target { kMain, kNoWrite, kNoRead, kNoAtomic, kDeregistered };

struct Case {
    const char *name;
    ibex_wr_opcode_t op;
    Target target;
    int64_t offset;      // from the target region's start
    uint32_t len;        // message length (atomics: 8)
    bool bad_rkey = false;
};

std::ostream &operator<<(std::ostream &os, const Case &c) { return os << c.name; }

class Protection : public ::testing::TestWithParam<Case> {
protected:
    void SetUp() override {
        a.open(kLen);
        b.open(kLen);
        ASSERT_TRUE(a.ok() && b.ok());
        connect_pair(a, b);
        // Extra regions on the target, each missing one remote right.
        for (int i = 0; i < 4; ++i) {
            extra[i].assign(64 * 1024, static_cast<uint8_t>(0x30 + i));
        }
        IBEX_ASSERT_OK(ibex_reg_mr(b.pd, extra[0].data(), extra[0].size(),
                                   IBEX_ACCESS_LOCAL_WRITE | IBEX_ACCESS_REMOTE_READ | IBEX_ACCESS_REMOTE_ATOMIC, &mr[0]));
        IBEX_ASSERT_OK(ibex_reg_mr(b.pd, extra[1].data(), extra[1].size(),
                                   IBEX_ACCESS_LOCAL_WRITE | IBEX_ACCESS_REMOTE_WRITE | IBEX_ACCESS_REMOTE_ATOMIC, &mr[1]));
        IBEX_ASSERT_OK(ibex_reg_mr(b.pd, extra[2].data(), extra[2].size(),
                                   IBEX_ACCESS_LOCAL_WRITE | IBEX_ACCESS_REMOTE_WRITE | IBEX_ACCESS_REMOTE_READ, &mr[2]));
        IBEX_ASSERT_OK(ibex_reg_mr(b.pd, extra[3].data(), extra[3].size(), kAllAccess, &mr[3]));
        stale_rkey = ibex_mr_rkey(mr[3]);
        IBEX_ASSERT_OK(ibex_dereg_mr(mr[3]));
        mr[3] = nullptr;
        for (size_t i = 0; i < kLen; ++i) b.buf[i] = static_cast<uint8_t>(i * 13 + 5);
        for (size_t i = 0; i < kLen; ++i) a.buf[i] = static_cast<uint8_t>(i * 7 + 1);
    }
    void TearDown() override {
        for (auto *m : mr)
            if (m) ibex_dereg_mr(m);
    }
    void region(Target t, uint64_t *base, uint32_t *rkey) {
        switch (t) {
        case Target::kMain: *base = b.va(); *rkey = ibex_mr_rkey(b.mr); return;
        case Target::kNoWrite: *base = reinterpret_cast<uintptr_t>(extra[0].data()); *rkey = ibex_mr_rkey(mr[0]); return;
        case Target::kNoRead: *base = reinterpret_cast<uintptr_t>(extra[1].data()); *rkey = ibex_mr_rkey(mr[1]); return;
        case Target::kNoAtomic: *base = reinterpret_cast<uintptr_t>(extra[2].data()); *rkey = ibex_mr_rkey(mr[2]); return;
        case Target::kDeregistered: *base = reinterpret_cast<uintptr_t>(extra[3].data()); *rkey = stale_rkey; return;
        }
    }

    Endpoint a, b;
    std::vector<uint8_t> extra[4];
    ibex_mr_t *mr[4] = {};
    uint32_t stale_rkey = 0;
};

TEST_P(Protection, RemoteAccessErrorLeavesTargetUntouchedAndFlushes) {
    const Case &c = GetParam();
    // A good WRITE first: it lands and succeeds (the QP works before the violation).
    ASSERT_EQ(a.post_rdma(IBEX_WR_RDMA_WRITE, 1, 0, 100, b.va(500), ibex_mr_rkey(b.mr)), IBEX_OK);
    auto wc = a.wait(1);
    ASSERT_EQ(wc.size(), 1u);
    ASSERT_EQ(wc[0].status, IBEX_WC_SUCCESS);
    ASSERT_EQ(0, std::memcmp(b.buf.data() + 500, a.buf.data(), 100));

    const std::vector<uint8_t> snap_main = b.buf;
    std::vector<uint8_t> snap_extra[4];
    for (int i = 0; i < 4; ++i) snap_extra[i] = extra[i];
    const std::vector<uint8_t> snap_local = a.buf;
    const uint64_t errs_before = b.counters().remote_access_errors;

    uint64_t base = 0;
    uint32_t rkey = 0;
    region(c.target, &base, &rkey);
    if (c.bad_rkey) rkey ^= 0x5500; // a key that names no region
    const uint64_t raddr = base + c.offset;
    if (c.op == IBEX_WR_ATOMIC_FETCH_AND_ADD || c.op == IBEX_WR_ATOMIC_CMP_AND_SWP)
        ASSERT_EQ(a.post_atomic(c.op, 2, 4096, raddr, rkey, 1, 2), IBEX_OK) << ibex_last_error();
    else
        ASSERT_EQ(a.post_rdma(c.op, 2, 8192, c.len, raddr, rkey, true, 0x1234), IBEX_OK) << ibex_last_error();
    // Work queued behind it: must be flushed, never executed.
    ASSERT_EQ(a.post_rdma(IBEX_WR_RDMA_WRITE, 3, 0, 64, b.va(0), ibex_mr_rkey(b.mr)), IBEX_OK);
    ASSERT_EQ(a.post_rdma(IBEX_WR_RDMA_READ, 4, 200000, 64, b.va(0), ibex_mr_rkey(b.mr)), IBEX_OK);
    ASSERT_EQ(a.post_rdma(IBEX_WR_RDMA_WRITE, 5, 0, 64, b.va(64), ibex_mr_rkey(b.mr), false), IBEX_OK); // unsignaled

    wc = a.wait(4, 5000);
    ASSERT_EQ(wc.size(), 4u) << "every WR must complete (errors complete unsignaled ones too)";
    EXPECT_EQ(wc[0].wr_id, 2u);
    EXPECT_EQ(wc[0].status, IBEX_WC_REM_ACCESS_ERR) << ibex_wc_status_str(wc[0].status);
    for (int i = 1; i < 4; ++i) {
        EXPECT_EQ(wc[i].wr_id, static_cast<uint64_t>(2 + i));
        EXPECT_EQ(wc[i].status, IBEX_WC_WR_FLUSH_ERR) << ibex_wc_status_str(wc[i].status);
    }
    EXPECT_EQ(a.qp_state(), IBEX_QPS_ERR);

    // A WR posted in ERR is accepted and flushed.
    ASSERT_EQ(a.post_rdma(IBEX_WR_RDMA_WRITE, 6, 0, 64, b.va(0), ibex_mr_rkey(b.mr)), IBEX_OK) << ibex_last_error();
    ASSERT_EQ(a.post_recv(7, 0, 64), IBEX_OK) << ibex_last_error();
    wc = a.wait(2, 2000);
    ASSERT_EQ(wc.size(), 2u);
    for (auto &w : wc) EXPECT_EQ(w.status, IBEX_WC_WR_FLUSH_ERR);
    EXPECT_TRUE(a.wait(1, 100).empty()) << "nothing else may complete";

    // Give any stray packet time to land, then compare the whole target.
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    EXPECT_TRUE(b.buf == snap_main) << "target memory changed";
    for (int i = 0; i < 4; ++i) EXPECT_TRUE(extra[i] == snap_extra[i]) << "region " << i << " changed";
    EXPECT_TRUE(a.buf == snap_local) << "requester memory changed (READ/atomic result written)";
    EXPECT_EQ(b.counters().remote_access_errors, errs_before + 1);
}

const uint32_t kL = 4096 * 3 + 5; // a multi-packet message

INSTANTIATE_TEST_SUITE_P(
    Cases, Protection,
    ::testing::Values(
        Case{"WriteBadRkey", IBEX_WR_RDMA_WRITE, Target::kMain, 0, 100, true},
        Case{"WriteImmBadRkey", IBEX_WR_RDMA_WRITE_WITH_IMM, Target::kMain, 0, 100, true},
        Case{"WriteOneBytePastEnd", IBEX_WR_RDMA_WRITE, Target::kMain, int64_t(kLen) - 99, 100},
        Case{"WriteStartsAtEnd", IBEX_WR_RDMA_WRITE, Target::kMain, int64_t(kLen), 1},
        Case{"WriteOneByteBeforeStart", IBEX_WR_RDMA_WRITE, Target::kMain, -1, 100},
        Case{"MultiPacketWriteRunsOut", IBEX_WR_RDMA_WRITE, Target::kMain, int64_t(kLen) - kL + 1, kL},
        Case{"WriteStaleKey", IBEX_WR_RDMA_WRITE, Target::kDeregistered, 0, 100},
        Case{"WriteWithoutRemoteWrite", IBEX_WR_RDMA_WRITE, Target::kNoWrite, 0, 100},
        Case{"MultiPacketWriteWithoutRemoteWrite", IBEX_WR_RDMA_WRITE, Target::kNoWrite, 0, kL},
        Case{"ReadBadRkey", IBEX_WR_RDMA_READ, Target::kMain, 0, 100, true},
        Case{"ReadOneBytePastEnd", IBEX_WR_RDMA_READ, Target::kMain, int64_t(kLen) - 99, 100},
        Case{"MultiPacketReadRunsOut", IBEX_WR_RDMA_READ, Target::kMain, int64_t(kLen) - kL + 1, kL},
        Case{"ReadWithoutRemoteRead", IBEX_WR_RDMA_READ, Target::kNoRead, 0, 100},
        Case{"ReadStaleKey", IBEX_WR_RDMA_READ, Target::kDeregistered, 0, 100},
        Case{"FetchAddBadRkey", IBEX_WR_ATOMIC_FETCH_AND_ADD, Target::kMain, 0, 8, true},
        Case{"FetchAddPastEnd", IBEX_WR_ATOMIC_FETCH_AND_ADD, Target::kMain, int64_t(kLen), 8},
        Case{"CmpSwapWithoutRemoteAtomic", IBEX_WR_ATOMIC_CMP_AND_SWP, Target::kNoAtomic, 0, 8},
        Case{"FetchAddWithoutRemoteAtomic", IBEX_WR_ATOMIC_FETCH_AND_ADD, Target::kNoAtomic, 64, 8},
        Case{"CmpSwapStaleKey", IBEX_WR_ATOMIC_CMP_AND_SWP, Target::kDeregistered, 0, 8}),
    [](const auto &info) { return std::string(info.param.name); });

// The edges themselves are legal: last byte, last word, whole region.
TEST_F(Protection, AccessesAtTheExactEdgesSucceed) {
    const uint32_t rk = ibex_mr_rkey(b.mr);
    ASSERT_EQ(a.post_rdma(IBEX_WR_RDMA_WRITE, 1, 0, 1, b.va(kLen - 1), rk), IBEX_OK);
    ASSERT_EQ(a.post_rdma(IBEX_WR_RDMA_READ, 2, 0, kLen, b.va(0), rk), IBEX_OK);
    ASSERT_EQ(a.post_atomic(IBEX_WR_ATOMIC_FETCH_AND_ADD, 3, 16, b.va(kLen - 8), rk, 1), IBEX_OK);
    auto wc = a.wait(3);
    ASSERT_EQ(wc.size(), 3u);
    for (auto &w : wc) EXPECT_EQ(w.status, IBEX_WC_SUCCESS) << "wr " << w.wr_id << ": " << ibex_wc_status_str(w.status);
    EXPECT_EQ(a.qp_state(), IBEX_QPS_RTS);
    EXPECT_EQ(b.counters().remote_access_errors, 0u);
}

// ------------------------------------------------------------------------------- RNR

class Rnr : public ::testing::Test {
protected:
    // a's RNR retry count is chosen before the QPs connect: verbs sets it at RTR -> RTS only.
    void connect(uint8_t rnr_retry) {
        a.open(1 << 20);
        b.open(1 << 20);
        ASSERT_TRUE(a.ok() && b.ok());
        a.choose_timers(14, 7, rnr_retry);
        connect_pair(a, b);
        IBEX_ASSERT_OK(b.set_min_rnr_timer(1)); // 0.01 ms between RNR retries
    }
    Endpoint a, b;
};

TEST_F(Rnr, SendWithoutReceiveExhaustsRnrRetry) {
    for (uint8_t rnr : {0, 2}) {
        SCOPED_TRACE(testing::Message() << "rnr_retry " << int(rnr));
        a.close();
        b.close();
        a.connect_mask = 0;
        connect(rnr);
        if (HasFatalFailure()) return;
        const uint64_t naks_before = b.counters().rnr_nak_sent;
        ASSERT_EQ(a.post_rdma(IBEX_WR_SEND, 1, 0, 300, 0, 0), IBEX_OK);
        ASSERT_EQ(a.post_rdma(IBEX_WR_RDMA_WRITE, 2, 0, 300, b.va(0), ibex_mr_rkey(b.mr)), IBEX_OK);
        const auto t0 = std::chrono::steady_clock::now();
        auto wc = a.wait(2, 5000);
        const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
        ASSERT_EQ(wc.size(), 2u);
        EXPECT_EQ(wc[0].wr_id, 1u);
        EXPECT_EQ(wc[0].status, IBEX_WC_RNR_RETRY_EXC_ERR) << ibex_wc_status_str(wc[0].status);
        EXPECT_EQ(wc[1].status, IBEX_WC_WR_FLUSH_ERR);
        EXPECT_EQ(a.qp_state(), IBEX_QPS_ERR);
        EXPECT_LT(ms, 2000) << "RNR retries must be paced by the RNR timer, not the transport timeout";
        EXPECT_EQ(a.counters().rnr_nak_received, rnr + 1u) << "one initial try plus rnr_retry retries";
        EXPECT_GE(b.counters().rnr_nak_sent - naks_before, rnr + 1u);
        EXPECT_TRUE(std::all_of(b.buf.begin(), b.buf.begin() + 300, [](uint8_t x) { return x == 0; }))
            << "the WRITE queued behind the failed SEND must not execute";
    }
}

TEST_F(Rnr, WriteWithImmWithoutReceiveExhaustsRnrRetry) {
    connect(1);
    if (HasFatalFailure()) return;
    ASSERT_EQ(a.post_rdma(IBEX_WR_RDMA_WRITE_WITH_IMM, 1, 0, 5000, b.va(0), ibex_mr_rkey(b.mr), true, 9), IBEX_OK);
    auto wc = a.wait(1, 5000);
    ASSERT_EQ(wc.size(), 1u);
    EXPECT_EQ(wc[0].status, IBEX_WC_RNR_RETRY_EXC_ERR) << ibex_wc_status_str(wc[0].status);
}

TEST_F(Rnr, InfiniteRnrRetrySucceedsWhenTheReceiveComesLate) {
    connect(7);
    if (HasFatalFailure()) return;
    fill_pattern(a.buf.data(), 10000, 61);
    ASSERT_EQ(a.post_rdma(IBEX_WR_SEND_WITH_IMM, 1, 0, 10000, 0, 0, true, 0xabc), IBEX_OK);
    ASSERT_EQ(a.post_rdma(IBEX_WR_SEND, 2, 0, 10, 0, 0), IBEX_OK);
    // Let it be refused for a while (many RNR NAKs), then post the receives.
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (a.counters().rnr_nak_received < 5 && std::chrono::steady_clock::now() < end) {
        EXPECT_TRUE(a.wait(1, 5).empty()) << "completed before any receive was posted";
    }
    ASSERT_GE(a.counters().rnr_nak_received, 5u);
    EXPECT_EQ(a.qp_state(), IBEX_QPS_RTS);
    ASSERT_EQ(b.post_recv(10, 100000, 20000), IBEX_OK);
    ASSERT_EQ(b.post_recv(11, 200000, 20000), IBEX_OK);
    auto wc = a.wait(2, 5000);
    ASSERT_EQ(wc.size(), 2u);
    EXPECT_EQ(wc[0].status, IBEX_WC_SUCCESS) << ibex_wc_status_str(wc[0].status);
    EXPECT_EQ(wc[1].status, IBEX_WC_SUCCESS) << ibex_wc_status_str(wc[1].status);
    auto rc = b.wait(2, 5000);
    ASSERT_EQ(rc.size(), 2u);
    EXPECT_EQ(rc[0].wr_id, 10u);
    EXPECT_EQ(rc[0].status, IBEX_WC_SUCCESS);
    EXPECT_EQ(rc[0].byte_len, 10000u);
    EXPECT_EQ(rc[0].imm_data, 0xabcu);
    EXPECT_EQ(rc[1].byte_len, 10u);
    EXPECT_EQ(check_pattern(b.buf.data() + 100000, 10000, 61), 0u);
    EXPECT_EQ(check_pattern(b.buf.data() + 200000, 10, 61), 0u);
}

} // namespace
