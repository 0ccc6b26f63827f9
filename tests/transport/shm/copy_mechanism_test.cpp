// Which mechanism moved the payload, asserted by the contexts' counters (never by timing):
// cross-memory attach by default, the per-QP ring when forced or when CMA is refused.
#include <sys/prctl.h>

#include "tests/transport/shm/shm_pair.h"
#include "tests/transport/soft/rc/peer.h"

using namespace ibex::test;

namespace {

constexpr size_t kBuf = 4 << 20;
constexpr uint32_t kBig = (1 << 20) + 13; // many ring slots, and an odd tail

// WRITE, READ and SEND of kBig bytes a -> b, each checked byte for byte.
void move_everything(ShmPair &p) {
    fill_pattern(p.a.buf.data(), kBig, 1);
    IBEX_ASSERT_OK(p.a.post_rdma(IBEX_WR_RDMA_WRITE, 1, 0, kBig, p.b.va(0), ibex_mr_rkey(p.b.mr)));
    fill_pattern(p.b.buf.data() + kBuf / 2, kBig, 2);
    IBEX_ASSERT_OK(p.a.post_rdma(IBEX_WR_RDMA_READ, 2, kBuf / 2, kBig, p.b.va(kBuf / 2), ibex_mr_rkey(p.b.mr)));
    auto wc = p.a.wait(2);
    ASSERT_EQ(wc.size(), 2u);
    for (auto &w : wc) EXPECT_EQ(w.status, IBEX_WC_SUCCESS) << ibex_wc_status_str(w.status);
    EXPECT_EQ(check_pattern(p.b.buf.data(), kBig, 1), 0u) << "WRITE";
    EXPECT_EQ(check_pattern(p.a.buf.data() + kBuf / 2, kBig, 2), 0u) << "READ";
    IBEX_ASSERT_OK(p.b.post_recv(3, kBuf / 4, kBig));
    fill_pattern(p.a.buf.data() + kBuf / 4, kBig, 3);
    IBEX_ASSERT_OK(p.a.post_rdma(IBEX_WR_SEND, 4, kBuf / 4, kBig, 0, 0));
    ASSERT_EQ(p.a.wait(1).size(), 1u);
    wc = p.b.wait(1);
    ASSERT_EQ(wc.size(), 1u);
    EXPECT_EQ(wc[0].status, IBEX_WC_SUCCESS);
    EXPECT_EQ(wc[0].byte_len, kBig);
    EXPECT_EQ(check_pattern(p.b.buf.data() + kBuf / 4, kBig, 3), 0u) << "SEND";
}

TEST(ShmCopy, CrossMemoryAttachByDefault) {
    ShmPair p;
    p.open(kBuf, nullptr);
    ASSERT_FALSE(::testing::Test::HasFatalFailure());
    move_everything(p);
    const auto a = stats(p.a), b = stats(p.b);
    // The WRITE and the READ are one process_vm_* call of the initiator's (b's published
    // MR allowed them), the SEND one of the target's.
    EXPECT_EQ(a.cma_ops, 2u);
    EXPECT_EQ(b.cma_ops, 1u);
    EXPECT_EQ(a.cma_bytes + b.cma_bytes, 3ull * kBig);
    EXPECT_EQ(a.ring_ops + b.ring_ops + a.map_ops + b.map_ops, 0u);
}

TEST(ShmCopy, RingWhenForced) {
    ShmPair p;
    p.open(kBuf, "ring");
    ASSERT_FALSE(::testing::Test::HasFatalFailure());
    move_everything(p);
    const auto a = stats(p.a), b = stats(p.b);
    const uint64_t slots = (kBig + ibex::shm::kSlotBytes - 1) / ibex::shm::kSlotBytes;
    // Every byte crosses twice: into a slot by one side, out of it by the other.
    EXPECT_EQ(a.ring_bytes, 3ull * kBig);
    EXPECT_EQ(b.ring_bytes, 3ull * kBig);
    EXPECT_EQ(a.ring_ops, 3 * slots);
    EXPECT_EQ(b.ring_ops, 3 * slots);
    EXPECT_EQ(a.cma_ops + b.cma_ops + a.map_ops + b.map_ops, 0u);
}

// A peer that may not reach this process by process_vm_* (this process is not dumpable,
// so ptrace access is refused to the same user without CAP_SYS_PTRACE) serves by the ring:
// a SEND, which the target always places itself.
TEST(ShmCopy, RingWhenCrossMemoryAttachIsRefused) {
    if (geteuid() == 0) GTEST_SKIP() << "running as root (CAP_SYS_PTRACE): process_vm_* is never refused here";
    RemotePeer peer;
    PeerConfig cfg;
    cfg.device = "shm";
    cfg.buf_bytes = kBuf;
    ASSERT_TRUE(peer.start(cfg)) << peer.error();
    ASSERT_EQ(prctl(PR_SET_DUMPABLE, 0), 0);
    Endpoint local;
    local.open(kBuf, "shm");
    IBEX_ASSERT_OK(ibex_qp_connect(local.qp, &peer.addr()));
    ASSERT_TRUE(peer.connect(local.addr())) << peer.error();
    fill_pattern(local.buf.data(), kBig, 9);
    ASSERT_EQ(peer.post_recv(7, {SgeDesc{0, kBig}}), IBEX_OK);
    IBEX_ASSERT_OK(local.post_rdma(IBEX_WR_SEND, 1, 0, kBig, 0, 0));
    auto wc = local.wait(1);
    const auto rc = peer.wait_recv(1);
    prctl(PR_SET_DUMPABLE, 1);
    ASSERT_EQ(wc.size(), 1u);
    EXPECT_EQ(wc[0].status, IBEX_WC_SUCCESS) << ibex_wc_status_str(wc[0].status);
    ASSERT_EQ(rc.size(), 1u);
    EXPECT_EQ(rc[0].status, IBEX_WC_SUCCESS);
    EXPECT_EQ(peer.verify_pattern(0, kBig, 9), 0);
    EXPECT_GE(stats(local).ring_ops, 1u) << "the peer could not attach: the payload must have gone through the ring";
    EXPECT_EQ(peer.finish(), 0);
}

} // namespace

namespace {

constexpr size_t kRead = 5 << 18, kSend = 5 << 19; // three disjoint kBig ranges: 0, kRead, kSend

// ibex_mem_alloc memory on both sides, registered; a WRITE, a READ and a SEND between
// the two allocations. Returns what the initiator (a) and the target (b) counted.
std::pair<ibex::shm::CopyStats, ibex::shm::CopyStats> move_between_allocations(const char *copy) {
    ShmPair p;
    p.open(4096, copy);
    void *amem = nullptr, *bmem = nullptr;
    ibex_mr_t *amr = nullptr, *bmr = nullptr;
    EXPECT_EQ(ibex_mem_alloc(p.a.pd, kBuf, &amem), IBEX_OK) << ibex_last_error();
    EXPECT_EQ(ibex_mem_alloc(p.b.pd, kBuf, &bmem), IBEX_OK) << ibex_last_error();
    EXPECT_EQ(ibex_reg_mr(p.a.pd, amem, kBuf, kAllAccess, &amr), IBEX_OK);
    EXPECT_EQ(ibex_reg_mr(p.b.pd, bmem, kBuf, kAllAccess, &bmr), IBEX_OK);
    auto *a = static_cast<uint8_t *>(amem), *b = static_cast<uint8_t *>(bmem);
    const auto va = [](void *m, size_t off) { return reinterpret_cast<uintptr_t>(m) + off; };
    auto post = [&](ibex_wr_opcode_t op, uint64_t id, size_t aoff, size_t boff) {
        EXPECT_EQ(post_one_wr(p.a.qp, op, id, va(amem, aoff), kBig, ibex_mr_lkey(amr), va(bmem, boff), ibex_mr_rkey(bmr)),
                  IBEX_OK)
            << ibex_last_error();
    };
    fill_pattern(a, kBig, 21);
    fill_pattern(b + kRead, kBig, 22);
    fill_pattern(a + kSend, kBig, 23);
    ibex_sge_t rs{va(bmem, kSend), kBig, ibex_mr_lkey(bmr)};
    ibex_recv_wr_t rw{};
    rw.wr_id = 9;
    rw.sg_list = &rs;
    rw.num_sge = 1;
    EXPECT_EQ(ibex_post_recv(p.b.qp, &rw, nullptr), IBEX_OK);
    post(IBEX_WR_RDMA_WRITE, 1, 0, 0);
    post(IBEX_WR_RDMA_READ, 2, kRead, kRead);
    post(IBEX_WR_SEND, 3, kSend, 0);
    auto wc = p.a.wait(3);
    EXPECT_EQ(wc.size(), 3u);
    for (auto &w : wc) EXPECT_EQ(w.status, IBEX_WC_SUCCESS) << ibex_wc_status_str(w.status);
    EXPECT_EQ(p.b.wait(1).size(), 1u);
    EXPECT_EQ(check_pattern(b, kBig, 21), 0u) << "WRITE";
    EXPECT_EQ(check_pattern(a + kRead, kBig, 22), 0u) << "READ";
    EXPECT_EQ(check_pattern(b + kSend, kBig, 23), 0u) << "SEND";
    const auto s = std::make_pair(stats(p.a), stats(p.b));
    ibex_dereg_mr(amr);
    ibex_dereg_mr(bmr);
    EXPECT_EQ(ibex_mem_free(p.a.pd, amem), IBEX_OK);
    EXPECT_EQ(ibex_mem_free(p.b.pd, bmem), IBEX_OK);
    return s;
}

TEST(ShmCopy, MapForIbexAllocatedMemory) {
    const auto [a, b] = move_between_allocations(nullptr);
    // The WRITE and the READ are the initiator's memcpy into / out of its mapping of b's
    // allocation; the SEND is the target's memcpy out of its mapping of a's.
    EXPECT_EQ(a.map_ops, 2u);
    EXPECT_EQ(b.map_ops, 1u);
    EXPECT_EQ(a.map_bytes + b.map_bytes, 3ull * kBig);
    EXPECT_EQ(a.cma_ops + a.ring_ops + b.cma_ops + b.ring_ops, 0u);
}

TEST(ShmCopy, CmaForcedOverIbexAllocatedMemory) {
    const auto [a, b] = move_between_allocations("cma");
    EXPECT_EQ(a.cma_ops, 2u); // WRITE, READ
    EXPECT_EQ(b.cma_ops, 1u); // SEND
    EXPECT_EQ(a.map_ops + b.map_ops + a.ring_ops + b.ring_ops, 0u);
}

TEST(ShmCopy, RingForcedOverIbexAllocatedMemory) {
    const auto [a, b] = move_between_allocations("ring");
    EXPECT_EQ(b.ring_bytes, 3ull * kBig);
    EXPECT_EQ(a.map_ops + b.map_ops + a.cma_ops + b.cma_ops, 0u);
}

} // namespace

namespace {

// The initiator's shortcut checks what the target would: a bad rkey, a range past the
// region or a region without the right falls back to the target, which refuses it, and
// the allocation is untouched.
TEST(ShmCopy, MapChecksKeysBoundsAndRightsLikeTheTarget) {
    struct Case {
        const char *what;
        ibex_wr_opcode_t op;
        uint32_t rkey_xor;
        size_t off;
        unsigned access;
    };
    for (const Case &c : {Case{"bad rkey", IBEX_WR_RDMA_WRITE, 0x5500, 0, kAllAccess},
                          Case{"bad rkey, with immediate", IBEX_WR_RDMA_WRITE_WITH_IMM, 0x5500, 0, kAllAccess},
                          Case{"no remote write, with immediate", IBEX_WR_RDMA_WRITE_WITH_IMM, 0, 0, IBEX_ACCESS_LOCAL_WRITE},
                          Case{"past the end", IBEX_WR_RDMA_WRITE, 0, 4096 - 100, kAllAccess},
                          Case{"no remote write", IBEX_WR_RDMA_WRITE, 0, 0, IBEX_ACCESS_LOCAL_WRITE},
                          Case{"no remote read", IBEX_WR_RDMA_READ, 0, 0, IBEX_ACCESS_LOCAL_WRITE | IBEX_ACCESS_REMOTE_WRITE}}) {
        SCOPED_TRACE(c.what);
        ShmPair p;
        p.open(4096, nullptr);
        AllocRegion b(p.b.pd, 4096, c.access), a(p.a.pd, 4096, kAllAccess);
        ASSERT_TRUE(a.ok() && b.ok());
        std::memset(b.bytes(), 0x3c, 4096);
        std::memset(a.bytes(), 0x11, 4096);
        ibex_sge_t s{a.at(0), 200, ibex_mr_lkey(a.mr)};
        ibex_send_wr_t wr{};
        wr.wr_id = 1;
        wr.sg_list = &s;
        wr.num_sge = 1;
        wr.opcode = c.op;
        wr.send_flags = IBEX_SEND_SIGNALED;
        wr.wr.rdma.remote_addr = b.at(c.off);
        wr.wr.rdma.rkey = ibex_mr_rkey(b.mr) ^ c.rkey_xor;
        ASSERT_EQ(ibex_post_send(p.a.qp, &wr, nullptr), IBEX_OK) << ibex_last_error();
        auto wc = p.a.wait(1);
        ASSERT_EQ(wc.size(), 1u);
        EXPECT_EQ(wc[0].status, IBEX_WC_REM_ACCESS_ERR) << ibex_wc_status_str(wc[0].status);
        EXPECT_EQ(check_const(b.bytes(), 4096, 0x3c), 0u) << "target memory changed";
        EXPECT_EQ(check_const(a.bytes(), 4096, 0x11), 0u) << "READ result written";
        EXPECT_EQ(stats(p.a).map_ops + stats(p.b).map_ops, 0u);
    }
}

} // namespace

namespace {

// A WRITE with immediate into ibex_mem_alloc memory is copied into the target's mapping by
// the initiator, and the request after it carries only the immediate. Several in a row:
// each lands whole, the receiver's completions come in order with their immediates and
// lengths, and the target moved no byte itself.
TEST(ShmCopy, WriteWithImmediateIsPlacedByTheInitiator) {
    ShmPair p;
    p.open(kBuf, nullptr);
    AllocRegion b(p.b.pd, kBuf, kAllAccess);
    ASSERT_TRUE(b.ok());
    constexpr int kWrites = 4;
    constexpr uint32_t kLen = (64 << 10) + 5;
    for (int i = 0; i < kWrites; ++i) IBEX_ASSERT_OK(p.b.post_recv(100 + i, 0, 0));
    for (int i = 0; i < kWrites; ++i) {
        fill_pattern(p.a.buf.data() + i * kLen, kLen, 40 + i);
        IBEX_ASSERT_OK(p.a.post_rdma(IBEX_WR_RDMA_WRITE_WITH_IMM, i, i * kLen, kLen, b.at(i * kLen), ibex_mr_rkey(b.mr),
                                     true, 0x1000 + i));
    }
    const auto sent = p.a.wait(kWrites);
    ASSERT_EQ(sent.size(), size_t(kWrites));
    for (const ibex_wc_t &w : sent) EXPECT_EQ(w.status, IBEX_WC_SUCCESS) << ibex_wc_status_str(w.status);
    const auto got = p.b.wait(kWrites);
    ASSERT_EQ(got.size(), size_t(kWrites));
    for (int i = 0; i < kWrites; ++i) {
        SCOPED_TRACE(i);
        EXPECT_EQ(got[i].status, IBEX_WC_SUCCESS) << ibex_wc_status_str(got[i].status);
        EXPECT_EQ(got[i].opcode, IBEX_WC_RECV_RDMA_WITH_IMM);
        EXPECT_EQ(got[i].wr_id, uint64_t(100 + i));
        EXPECT_EQ(got[i].imm_data, uint32_t(0x1000 + i));
        EXPECT_TRUE(got[i].wc_flags & IBEX_WC_WITH_IMM);
        EXPECT_EQ(got[i].byte_len, kLen);
        EXPECT_EQ(check_pattern(b.bytes() + i * kLen, kLen, 40 + i), 0u);
    }
    const auto sa = stats(p.a), sb = stats(p.b);
    EXPECT_EQ(sa.map_ops, uint64_t(kWrites));
    EXPECT_EQ(sa.map_bytes, uint64_t(kWrites) * kLen);
    EXPECT_EQ(sb.map_ops + sb.cma_ops + sb.ring_ops, 0u) << "the target moved the payload itself";
}

// The receiver has no receive posted: the placed WRITE's request is refused (RNR) and sent
// again until a receive is there; then it completes with its immediate, and its bytes are
// the sender's.
TEST(ShmCopy, PlacedWriteWithImmediateWaitsOutAReceiverNotReady) {
    ShmPair p;
    p.open(4096, nullptr);
    AllocRegion b(p.b.pd, 4096, kAllAccess);
    ASSERT_TRUE(b.ok());
    // ibex_qp_connect's rnr_retry is 7: RNR retries without limit.
    fill_pattern(p.a.buf.data(), 1000, 5);
    IBEX_ASSERT_OK(p.a.post_rdma(IBEX_WR_RDMA_WRITE_WITH_IMM, 1, 0, 1000, b.at(8), ibex_mr_rkey(b.mr), true, 77));
    EXPECT_TRUE(p.a.wait(1, 30).empty()) << "completed without a receive at the target";
    IBEX_ASSERT_OK(p.b.post_recv(2, 0, 0));
    const auto sent = p.a.wait(1);
    ASSERT_EQ(sent.size(), 1u);
    EXPECT_EQ(sent[0].status, IBEX_WC_SUCCESS) << ibex_wc_status_str(sent[0].status);
    const auto got = p.b.wait(1);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].imm_data, 77u);
    EXPECT_EQ(got[0].byte_len, 1000u);
    EXPECT_EQ(check_pattern(b.bytes() + 8, 1000, 5), 0u);
    ibex_counters_t c;
    IBEX_ASSERT_OK(p.a.query_counters(&c));
    EXPECT_GE(c.rnr_nak_received, 1u);
    EXPECT_GE(stats(p.a).map_ops, 1u);
}

// A chain of WRITEs between allocations is copied in place while it can be; from the
// first WRITE that cannot (here a bad rkey) the rest queue behind it. Completions come in
// chain order, the refused WRITE leaves the target untouched, and the QP then goes to the
// error state as on any provider, flushing what followed.
TEST(ShmCopy, ChainGoesInPlaceUntilAWriteCannot) {
    for (const bool with_bad : {false, true}) {
        SCOPED_TRACE(with_bad ? "third WRITE with a bad rkey" : "every WRITE good");
        ShmPair p;
        p.open(4096, nullptr);
        AllocRegion br(p.b.pd, 4096, kAllAccess), ar(p.a.pd, 4096, kAllAccess);
        ASSERT_TRUE(ar.ok() && br.ok());
        uint8_t *a = ar.bytes(), *b = br.bytes();
        std::memset(b, 0x3c, 4096);
        constexpr int kChain = 4;
        constexpr size_t kPiece = 512;
        ibex_sge_t sge[kChain];
        ibex_send_wr_t wr[kChain]{};
        for (int i = 0; i < kChain; ++i) {
            std::memset(a + i * kPiece, 0x40 + i, kPiece);
            sge[i] = {ar.at(i * kPiece), kPiece, ibex_mr_lkey(ar.mr)};
            wr[i].wr_id = 100 + static_cast<uint64_t>(i);
            wr[i].sg_list = &sge[i];
            wr[i].num_sge = 1;
            wr[i].opcode = IBEX_WR_RDMA_WRITE;
            wr[i].send_flags = IBEX_SEND_SIGNALED;
            wr[i].wr.rdma.remote_addr = br.at(i * kPiece);
            wr[i].wr.rdma.rkey = ibex_mr_rkey(br.mr) ^ (with_bad && i == 2 ? 0x5500u : 0u);
            wr[i].next = i + 1 < kChain ? &wr[i + 1] : nullptr;
        }
        ibex_send_wr_t *bad = nullptr;
        ASSERT_EQ(ibex_post_send(p.a.qp, wr, &bad), IBEX_OK) << ibex_last_error();
        EXPECT_EQ(bad, nullptr);
        // Done in place: copied before the post returned.
        EXPECT_EQ(stats(p.a).map_ops, with_bad ? 2u : 4u);
        auto wc = p.a.wait(kChain);
        ASSERT_EQ(wc.size(), static_cast<size_t>(kChain));
        for (int i = 0; i < kChain; ++i) {
            SCOPED_TRACE(i);
            EXPECT_EQ(wc[static_cast<size_t>(i)].wr_id, 100u + static_cast<uint64_t>(i)) << "completions out of chain order";
            const ibex_wc_status_t want = !with_bad || i < 2 ? IBEX_WC_SUCCESS
                                          : i == 2           ? IBEX_WC_REM_ACCESS_ERR
                                                             : IBEX_WC_WR_FLUSH_ERR;
            EXPECT_EQ(wc[static_cast<size_t>(i)].status, want) << ibex_wc_status_str(wc[static_cast<size_t>(i)].status);
            const uint8_t landed = !with_bad || i < 2 ? static_cast<uint8_t>(0x40 + i) : 0x3c;
            EXPECT_EQ(check_const(b + i * kPiece, kPiece, landed), 0u);
        }
    }
}

} // namespace
