// PSN wrap-around: QPs brought up by hand with send and receive PSNs just below 0xffffff,
// so every message kind crosses 0xffffff -> 0 (requester PSNs, una, sent_high, READ
// segments, the responder's expected PSN, the atomic replay ring), with and without
// injected loss, reordering and duplication. Data and in-order completion are checked.
#include <cstdlib>

#include "tests/transport/soft/rc/manual_qp.h"

using namespace ibex::test;

namespace {

constexpr uint32_t kWrapPsn = 0xfffff0;
constexpr size_t kBuf = 4 << 20;

uint32_t psn_plus(uint32_t psn, uint32_t n) { return (psn + n) & 0xffffff; }

class PsnWrap : public ::testing::Test {
protected:
    // Small windows split READs into many requests and keep retransmission windows short.
    void SetUp() override {
        if (kTestDevice == "shm")
            GTEST_SKIP() << "shm sends no packets: its sequence numbers are 64-bit counters that never wrap, "
                            "and it accepts PSN attributes without using them";
    }
    void open_pair(uint32_t psn, const char *max_inflight = nullptr) {
        if (max_inflight) setenv("IBEX_MAX_INFLIGHT", max_inflight, 1);
        a.open(kBuf);
        b.open(kBuf);
        if (max_inflight) unsetenv("IBEX_MAX_INFLIGHT");
        ASSERT_TRUE(a.ok() && b.ok());
        connect_at(a, b, psn);
    }
    void faults(double loss, double reorder, double dup, uint64_t seed) {
        ibex_fault_config_t f = IBEX_FAULT_CONFIG_INIT;
        f.loss = loss;
        f.reorder = reorder;
        f.duplicate = dup;
        f.seed = seed;
        IBEX_ASSERT_OK(ibex_set_faults(a.ctx, &f));
        f.seed = seed + 1;
        IBEX_ASSERT_OK(ibex_set_faults(b.ctx, &f));
    }
    Endpoint a, b;
};

TEST_F(PsnWrap, MultiPacketWritesCrossTheWrap) {
    open_pair(kWrapPsn);
    constexpr uint32_t kLen = 64 * 1024, kN = 16; // 64 packets each at MTU 1024
    fill_bytes(a.buf, 0, kLen * kN, 1);
    for (uint32_t i = 0; i < kN; ++i)
        IBEX_ASSERT_OK(a.post_rdma(IBEX_WR_RDMA_WRITE, i, i * kLen, kLen, b.va(i * kLen), ibex_mr_rkey(b.mr)));
    expect_in_order_success(a.wait(kN), kN);
    EXPECT_EQ(0, std::memcmp(a.buf.data(), b.buf.data(), kLen * kN));
    EXPECT_EQ(sq_psn_of(a.qp), psn_plus(kWrapPsn, kN * 64));
    EXPECT_EQ(a.counters().packet_seq_err, 0u);
}

TEST_F(PsnWrap, SendsCrossTheWrap) {
    open_pair(kWrapPsn);
    constexpr uint32_t kLen = 40000, kN = 8; // 40 packets each
    fill_bytes(a.buf, 0, kLen * kN, 2);
    for (uint32_t i = 0; i < kN; ++i) IBEX_ASSERT_OK(b.post_recv(100 + i, i * kLen, kLen));
    for (uint32_t i = 0; i < kN; ++i)
        IBEX_ASSERT_OK(a.post_rdma(i % 2 ? IBEX_WR_SEND_WITH_IMM : IBEX_WR_SEND, i, i * kLen, kLen, 0, 0, true, i));
    expect_in_order_success(a.wait(kN), kN);
    auto rc = b.wait(kN);
    expect_in_order_success(rc, kN, 100);
    for (uint32_t i = 0; i < rc.size(); ++i) {
        EXPECT_EQ(rc[i].byte_len, kLen);
        EXPECT_EQ(rc[i].opcode, IBEX_WC_RECV);
        if (i % 2) {
            EXPECT_EQ(rc[i].imm_data, i);
        }
    }
    EXPECT_EQ(0, std::memcmp(a.buf.data(), b.buf.data(), kLen * kN));
}

TEST_F(PsnWrap, LargeReadsSplitIntoRequestsCrossTheWrap) {
    // Window 64: READs go out as requests of 32 response packets, the first straddling 0.
    open_pair(kWrapPsn, "64");
    constexpr uint32_t kLen = 256 * 1024, kN = 4; // 256 response packets, 8 requests each
    fill_bytes(b.buf, 0, kLen * kN, 3);
    for (uint32_t i = 0; i < kN; ++i)
        IBEX_ASSERT_OK(a.post_rdma(IBEX_WR_RDMA_READ, i, i * kLen, kLen, b.va(i * kLen), ibex_mr_rkey(b.mr)));
    expect_in_order_success(a.wait(kN), kN);
    EXPECT_EQ(0, std::memcmp(a.buf.data(), b.buf.data(), kLen * kN));
    EXPECT_EQ(sq_psn_of(a.qp), psn_plus(kWrapPsn, kN * 256));
}

TEST_F(PsnWrap, ReadSegmentsStartingExactlyAtZero) {
    // 16 PSNs before the wrap and 32-packet segments: the second segment starts at PSN 0.
    open_pair(0xffffe0, "64");
    constexpr uint32_t kLen = 200 * 1024 + 17;
    fill_bytes(b.buf, 0, kLen, 4);
    IBEX_ASSERT_OK(a.post_rdma(IBEX_WR_RDMA_READ, 0, 0, kLen, b.va(0), ibex_mr_rkey(b.mr)));
    expect_in_order_success(a.wait(1), 1);
    EXPECT_EQ(0, std::memcmp(a.buf.data(), b.buf.data(), kLen));
}

TEST_F(PsnWrap, AtomicsCrossTheWrap) {
    open_pair(0xfffffa);
    constexpr uint32_t kN = 12; // one PSN each: 6 before the wrap, 6 after
    uint64_t init = 1000;
    std::memcpy(b.buf.data() + 64, &init, 8);
    for (uint32_t i = 0; i < kN; ++i)
        IBEX_ASSERT_OK(a.post_atomic(IBEX_WR_ATOMIC_FETCH_AND_ADD, i, 4096 + 8 * i, b.va(64), ibex_mr_rkey(b.mr), 3));
    expect_in_order_success(a.wait(kN), kN);
    for (uint32_t i = 0; i < kN; ++i) {
        uint64_t got;
        std::memcpy(&got, a.buf.data() + 4096 + 8 * i, 8);
        EXPECT_EQ(got, 1000u + 3 * i) << "atomic " << i;
    }
    uint64_t fin;
    std::memcpy(&fin, b.buf.data() + 64, 8);
    EXPECT_EQ(fin, 1000u + 3 * kN);
    // Then a compare-and-swap at PSN 6 (after the wrap).
    IBEX_ASSERT_OK(a.post_atomic(IBEX_WR_ATOMIC_CMP_AND_SWP, 99, 0, b.va(64), ibex_mr_rkey(b.mr), fin, 5));
    auto wc = a.wait(1);
    ASSERT_EQ(wc.size(), 1u);
    EXPECT_EQ(wc[0].status, IBEX_WC_SUCCESS);
    std::memcpy(&fin, b.buf.data() + 64, 8);
    EXPECT_EQ(fin, 5u);
}

// Mixed WRITE / READ / SEND / atomic stream that crosses the wrap with loss, reordering
// and duplication both ways. Every WR owns a slot, so every byte can be checked.
void mixed_run(Endpoint &a, Endpoint &b, uint32_t n, uint32_t seed) {
    constexpr uint32_t kSlot = 24 * 1024;
    ASSERT_LE(size_t(n) * kSlot, kBuf);
    std::vector<uint32_t> len(n);
    uint32_t sends = 0;
    for (uint32_t i = 0; i < n; ++i) {
        len[i] = 1 + (i * 7919u + seed) % (kSlot - 1);
        const size_t off = size_t(i) * kSlot;
        switch (i % 4) {
        case 0: fill_bytes(a.buf, off, len[i], seed + i); break;                         // WRITE
        case 1: fill_bytes(b.buf, off, len[i], seed + i); break;                         // READ
        case 2: fill_bytes(a.buf, off, len[i], seed + i); ++sends; break;                // SEND
        case 3: { uint64_t v = i; std::memcpy(b.buf.data() + off, &v, 8); break; }      // atomic
        }
    }
    uint32_t r = 0;
    for (uint32_t i = 2; i < n; i += 4) IBEX_ASSERT_OK(b.post_recv(1000 + r++, size_t(i) * kSlot, kSlot));
    for (uint32_t i = 0; i < n; ++i) {
        const size_t off = size_t(i) * kSlot;
        switch (i % 4) {
        case 0: IBEX_ASSERT_OK(a.post_rdma(IBEX_WR_RDMA_WRITE, i, off, len[i], b.va(off), ibex_mr_rkey(b.mr))); break;
        case 1: IBEX_ASSERT_OK(a.post_rdma(IBEX_WR_RDMA_READ, i, off, len[i], b.va(off), ibex_mr_rkey(b.mr))); break;
        case 2: IBEX_ASSERT_OK(a.post_rdma(IBEX_WR_SEND, i, off, len[i], 0, 0)); break;
        case 3:
            IBEX_ASSERT_OK(a.post_atomic(IBEX_WR_ATOMIC_FETCH_AND_ADD, i, off, b.va(off), ibex_mr_rkey(b.mr), 1000));
            break;
        }
    }
    expect_in_order_success(a.wait(n, 30000), n);
    auto rc = b.wait(sends, 10000);
    expect_in_order_success(rc, sends, 1000);
    // Nothing completes twice.
    EXPECT_TRUE(a.wait(1, 50).empty());
    EXPECT_TRUE(b.wait(1, 50).empty());
    for (uint32_t i = 0; i < n; ++i) {
        const size_t off = size_t(i) * kSlot;
        if (i % 4 == 3) {
            uint64_t orig, now;
            std::memcpy(&orig, a.buf.data() + off, 8);
            std::memcpy(&now, b.buf.data() + off, 8);
            ASSERT_EQ(orig, i) << "atomic " << i;
            ASSERT_EQ(now, i + 1000u) << "atomic " << i << " executed other than once";
        } else {
            ASSERT_EQ(0, std::memcmp(a.buf.data() + off, b.buf.data() + off, len[i])) << "WR " << i << " op " << i % 4;
        }
        if (i % 4 == 2) {
            ASSERT_EQ(rc[i / 4].byte_len, len[i]);
        }
    }
}

TEST_F(PsnWrap, MixedTrafficAcrossTheWrap) {
    open_pair(0xffff00);
    mixed_run(a, b, 160, 7);
}

TEST_F(PsnWrap, MixedTrafficAcrossTheWrapWithFaults) {
    open_pair(0xfffe00, "64");
    faults(0.03, 0.03, 0.02, 0x5eed);
    mixed_run(a, b, 160, 11);
    const auto ca = a.counters(), cb = b.counters();
    EXPECT_GT(ca.faults_injected + cb.faults_injected, 0u);
    EXPECT_GT(ca.retransmitted_packets, 0u);
}

TEST_F(PsnWrap, WritesAcrossTheWrapWithHeavyLoss) {
    // Loss only, 10%, so go-back-N rewinds straddle the wrap many times.
    open_pair(0xffffc0, "64");
    faults(0.10, 0, 0, 42);
    constexpr uint32_t kLen = 16 * 1024, kN = 16; // 16 packets each, 256 in all
    fill_bytes(a.buf, 0, kLen * kN, 5);
    for (uint32_t i = 0; i < kN; ++i)
        IBEX_ASSERT_OK(a.post_rdma(IBEX_WR_RDMA_WRITE, i, i * kLen, kLen, b.va(i * kLen), ibex_mr_rkey(b.mr)));
    expect_in_order_success(a.wait(kN, 30000), kN);
    EXPECT_EQ(0, std::memcmp(a.buf.data(), b.buf.data(), kLen * kN));
    EXPECT_GT(a.counters().retransmitted_packets, 0u);
    EXPECT_GT(b.counters().out_of_sequence, 0u);
}

} // namespace
