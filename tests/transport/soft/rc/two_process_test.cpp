// RC between two processes over loopback UDP: the parent drives one QP, a forked child
// (its own context, own 127.0.0.x:4791) owns the other. Every opcode, message sizes
// 1 B .. 16 MiB, up to 16 SGEs of odd lengths, immediate data, signaled and unsignaled
// WRs; every byte is checked on the side that received it, and the bytes around the
// target are checked untouched.
#include <array>

#include "tests/transport/soft/rc/peer.h"

using namespace ibex::test;

namespace {

constexpr size_t kMiB = 1 << 20;
constexpr size_t kGuard = 4099;                 // odd: targets are deliberately misaligned
constexpr size_t kBuf = 16 * kMiB + 4 * kGuard + 4096;
constexpr uint8_t kFill = 0xEE;
constexpr int kOpTimeoutMs = 30000;

class TwoProcess : public ::testing::Test {
protected:
    void SetUp() override {
        PeerConfig cfg;
        cfg.buf_bytes = kBuf;
        cfg.max_recv_wr = 256;
        // Fork first: the parent must have no context (and no progress thread) yet.
        ASSERT_TRUE(peer.start(cfg)) << peer.error();
        local.open(kBuf);
        ASSERT_TRUE(local.ok());
        IBEX_ASSERT_OK(ibex_qp_connect(local.qp, &peer.addr()));
        ASSERT_TRUE(peer.connect(local.addr())) << peer.error();
    }
    void TearDown() override {
        const int code = peer.finish();
        EXPECT_EQ(code, 0) << "child " << ChildProcess::describe(code);
        local.close();
    }

    ibex_wc_t one_completion(uint64_t wr_id, ibex_wc_opcode_t op) {
        auto wc = local.wait(1, kOpTimeoutMs);
        EXPECT_EQ(wc.size(), 1u) << "no completion for wr " << wr_id;
        if (wc.empty()) return ibex_wc_t{};
        EXPECT_EQ(wc[0].wr_id, wr_id);
        EXPECT_EQ(wc[0].status, IBEX_WC_SUCCESS) << ibex_wc_status_str(wc[0].status);
        EXPECT_EQ(wc[0].opcode, op);
        EXPECT_EQ(wc[0].qp_num, ibex_qp_num(local.qp));
        return wc[0];
    }

    // WRITE / WRITE_WITH_IMM of `size` bytes to the child at offset kGuard.
    void write_and_check(ibex_wr_opcode_t op, size_t size, uint64_t seed) {
        const bool imm = op == IBEX_WR_RDMA_WRITE_WITH_IMM;
        SCOPED_TRACE(testing::Message() << (imm ? "WRITE_WITH_IMM " : "WRITE ") << size << " B");
        ASSERT_EQ(peer.fill_const(0, size + 2 * kGuard, kFill), 0);
        fill_pattern(local.buf.data() + 5, size, seed);
        if (imm) {
            ASSERT_EQ(peer.post_recv(900 + seed, {}), IBEX_OK);
        }
        const uint32_t immv = static_cast<uint32_t>(0xA5000000u | seed);
        ASSERT_EQ(local.post_rdma(op, seed, 5, static_cast<uint32_t>(size), peer.va(kGuard), peer.rkey(), true, immv),
                  IBEX_OK)
            << ibex_last_error();
        one_completion(seed, IBEX_WC_RDMA_WRITE);
        uint64_t first = 0;
        EXPECT_EQ(peer.verify_pattern(kGuard, size, seed, 0, &first), 0) << "first bad byte at " << first;
        EXPECT_EQ(peer.verify_const(0, kGuard, kFill), 0) << "bytes before the target changed";
        EXPECT_EQ(peer.verify_const(kGuard + size, kGuard, kFill), 0) << "bytes after the target changed";
        if (imm) {
            auto rc = peer.wait_recv(1, kOpTimeoutMs);
            ASSERT_EQ(rc.size(), 1u);
            EXPECT_EQ(rc[0].status, IBEX_WC_SUCCESS) << ibex_wc_status_str(rc[0].status);
            EXPECT_EQ(rc[0].opcode, IBEX_WC_RECV_RDMA_WITH_IMM);
            EXPECT_EQ(rc[0].wr_id, 900 + seed);
            EXPECT_EQ(rc[0].imm_data, immv);
            EXPECT_TRUE(rc[0].wc_flags & IBEX_WC_WITH_IMM);
            EXPECT_EQ(rc[0].byte_len, size);
        }
    }

    void send_and_check(ibex_wr_opcode_t op, size_t size, uint64_t seed) {
        const bool imm = op == IBEX_WR_SEND_WITH_IMM;
        SCOPED_TRACE(testing::Message() << (imm ? "SEND_WITH_IMM " : "SEND ") << size << " B");
        const size_t slack = 77;
        ASSERT_EQ(peer.fill_const(0, size + slack + 2 * kGuard, kFill), 0);
        ASSERT_EQ(peer.post_recv(700 + seed, {{kGuard, size + slack}}), IBEX_OK);
        fill_pattern(local.buf.data() + 1, size, seed);
        const uint32_t immv = static_cast<uint32_t>(0x5A000000u | seed);
        ASSERT_EQ(local.post_rdma(op, seed, 1, static_cast<uint32_t>(size), 0, 0, true, immv), IBEX_OK)
            << ibex_last_error();
        one_completion(seed, IBEX_WC_SEND);
        auto rc = peer.wait_recv(1, kOpTimeoutMs);
        ASSERT_EQ(rc.size(), 1u);
        EXPECT_EQ(rc[0].status, IBEX_WC_SUCCESS) << ibex_wc_status_str(rc[0].status);
        EXPECT_EQ(rc[0].opcode, IBEX_WC_RECV);
        EXPECT_EQ(rc[0].wr_id, 700 + seed);
        EXPECT_EQ(rc[0].byte_len, size);
        EXPECT_EQ(rc[0].src_qp, ibex_qp_num(local.qp));
        if (imm) {
            EXPECT_TRUE(rc[0].wc_flags & IBEX_WC_WITH_IMM);
            EXPECT_EQ(rc[0].imm_data, immv);
        } else {
            EXPECT_FALSE(rc[0].wc_flags & IBEX_WC_WITH_IMM);
        }
        uint64_t first = 0;
        EXPECT_EQ(peer.verify_pattern(kGuard, size, seed, 0, &first), 0) << "first bad byte at " << first;
        EXPECT_EQ(peer.verify_const(0, kGuard, kFill), 0);
        EXPECT_EQ(peer.verify_const(kGuard + size, slack + kGuard, kFill), 0) << "receive buffer past the message changed";
    }

    void read_and_check(size_t size, uint64_t seed) {
        SCOPED_TRACE(testing::Message() << "READ " << size << " B");
        ASSERT_EQ(peer.fill_pattern(kGuard + 3, size, seed), 0);
        std::memset(local.buf.data(), kFill, size + 2 * kGuard);
        ASSERT_EQ(local.post_rdma(IBEX_WR_RDMA_READ, seed, kGuard, static_cast<uint32_t>(size), peer.va(kGuard + 3),
                                  peer.rkey()),
                  IBEX_OK)
            << ibex_last_error();
        auto wc = one_completion(seed, IBEX_WC_RDMA_READ);
        EXPECT_EQ(wc.byte_len, size);
        uint64_t first = 0;
        EXPECT_EQ(check_pattern(local.buf.data() + kGuard, size, seed, 0, &first), 0u) << "first bad byte at " << first;
        EXPECT_EQ(check_const(local.buf.data(), kGuard, kFill), 0u);
        EXPECT_EQ(check_const(local.buf.data() + kGuard + size, kGuard, kFill), 0u);
    }

    RemotePeer peer;
    Endpoint local;
};

class TwoProcessSizes : public TwoProcess, public ::testing::WithParamInterface<size_t> {};

TEST_P(TwoProcessSizes, EveryDataOpcodeMovesEveryByte) {
    const size_t size = GetParam();
    const uint64_t s = (size % 997) * 8;
    write_and_check(IBEX_WR_RDMA_WRITE, size, s + 1);
    write_and_check(IBEX_WR_RDMA_WRITE_WITH_IMM, size, s + 2);
    send_and_check(IBEX_WR_SEND, size, s + 3);
    send_and_check(IBEX_WR_SEND_WITH_IMM, size, s + 4);
    read_and_check(size, s + 5);
}

INSTANTIATE_TEST_SUITE_P(Sizes, TwoProcessSizes,
                         ::testing::Values(size_t{1}, size_t{2}, size_t{3}, size_t{255}, size_t{4095}, size_t{4096},
                                           size_t{4097}, size_t{65536}, kMiB + 13, 16 * kMiB),
                         [](const auto &info) { return "B" + std::to_string(info.param); });

TEST_F(TwoProcess, ZeroLengthMessages) {
    ASSERT_EQ(peer.post_recv(1, {{0, 64}}), IBEX_OK);
    ASSERT_EQ(local.post_rdma(IBEX_WR_SEND, 10, 0, 0, 0, 0), IBEX_OK) << ibex_last_error();
    one_completion(10, IBEX_WC_SEND);
    auto rc = peer.wait_recv(1);
    ASSERT_EQ(rc.size(), 1u);
    EXPECT_EQ(rc[0].status, IBEX_WC_SUCCESS);
    EXPECT_EQ(rc[0].byte_len, 0u);
    ASSERT_EQ(local.post_rdma(IBEX_WR_RDMA_WRITE, 11, 0, 0, peer.va(0), peer.rkey()), IBEX_OK) << ibex_last_error();
    one_completion(11, IBEX_WC_RDMA_WRITE);
    ASSERT_EQ(peer.post_recv(2, {}), IBEX_OK);
    ASSERT_EQ(local.post_rdma(IBEX_WR_RDMA_WRITE_WITH_IMM, 12, 0, 0, peer.va(0), peer.rkey(), true, 77), IBEX_OK);
    one_completion(12, IBEX_WC_RDMA_WRITE);
    rc = peer.wait_recv(1);
    ASSERT_EQ(rc.size(), 1u);
    EXPECT_EQ(rc[0].status, IBEX_WC_SUCCESS);
    EXPECT_EQ(rc[0].imm_data, 77u);
    EXPECT_EQ(rc[0].byte_len, 0u);
    ASSERT_EQ(local.post_rdma(IBEX_WR_RDMA_READ, 13, 0, 0, peer.va(0), peer.rkey()), IBEX_OK) << ibex_last_error();
    one_completion(13, IBEX_WC_RDMA_READ);
}

TEST_F(TwoProcess, AtomicsReturnOriginalAndUpdateTarget) {
    // The last 8-byte-aligned word that lies wholly inside the child's MR too.
    const uint64_t last = ((peer.va(peer.len()) - 8) & ~7ull) - peer.va();
    ASSERT_EQ(peer.va(0) % 8, 0u);
    const uint64_t words[] = {0, 8, 4096, 65536 + 8, last};
    std::memset(local.buf.data(), kFill, 4096);
    uint64_t id = 100;
    auto atomic = [&](ibex_wr_opcode_t op, size_t loff, uint64_t roff, uint64_t cmp_add, uint64_t swap) {
        ASSERT_EQ(local.post_atomic(op, ++id, loff, peer.va(roff), peer.rkey(), cmp_add, swap), IBEX_OK)
            << ibex_last_error();
        one_completion(id, op == IBEX_WR_ATOMIC_FETCH_AND_ADD ? IBEX_WC_FETCH_ADD : IBEX_WC_COMP_SWAP);
    };
    auto local_u64 = [&](size_t off) {
        uint64_t v;
        std::memcpy(&v, local.buf.data() + off, 8);
        return v;
    };
    for (uint64_t w : words) {
        SCOPED_TRACE(testing::Message() << "remote word at offset " << w);
        // Seed the word with a WRITE: the atomic after it on the same QP must see it.
        const uint64_t v0 = 0x0123456789abcdefull ^ w;
        std::memcpy(local.buf.data() + 2048, &v0, 8);
        ASSERT_EQ(local.post_rdma(IBEX_WR_RDMA_WRITE, ++id, 2048, 8, peer.va(w), peer.rkey(), false), IBEX_OK);
        atomic(IBEX_WR_ATOMIC_FETCH_AND_ADD, 8, w, 0x1111, 0);
        EXPECT_EQ(local_u64(8), v0);
        atomic(IBEX_WR_ATOMIC_CMP_AND_SWP, 24, w, v0 + 0x1111, 0xfeedface00000000ull); // matches: swaps
        EXPECT_EQ(local_u64(24), v0 + 0x1111);
        atomic(IBEX_WR_ATOMIC_CMP_AND_SWP, 40, w, 12345, 777); // does not match: no swap
        EXPECT_EQ(local_u64(40), 0xfeedface00000000ull);
        atomic(IBEX_WR_ATOMIC_FETCH_AND_ADD, 56, w, 0x0000000100000000ull + 0xffffffffull, 0); // carries
        EXPECT_EQ(local_u64(56), 0xfeedface00000000ull);
        std::vector<uint8_t> got;
        ASSERT_TRUE(peer.get_bytes(w, 8, got)) << peer.error();
        uint64_t fin;
        std::memcpy(&fin, got.data(), 8);
        EXPECT_EQ(fin, 0xfeedface00000000ull + 0x00000001ffffffffull);
        // The local return buffers are exactly 8 bytes: neighbours untouched.
        EXPECT_EQ(check_const(local.buf.data() + 16, 8, kFill), 0u);
        EXPECT_EQ(check_const(local.buf.data() + 32, 8, kFill), 0u);
        EXPECT_EQ(check_const(local.buf.data() + 48, 8, kFill), 0u);
        EXPECT_EQ(check_const(local.buf.data() + 64, 8, kFill), 0u);
    }
    // FETCH_AND_ADD wraps modulo 2^64.
    const uint64_t top = ~0ull;
    std::memcpy(local.buf.data() + 2048, &top, 8);
    ASSERT_EQ(local.post_rdma(IBEX_WR_RDMA_WRITE, ++id, 2048, 8, peer.va(512), peer.rkey(), false), IBEX_OK);
    atomic(IBEX_WR_ATOMIC_FETCH_AND_ADD, 8, 512, 3, 0);
    EXPECT_EQ(local_u64(8), top);
    std::vector<uint8_t> got;
    ASSERT_TRUE(peer.get_bytes(512, 8, got));
    uint64_t fin;
    std::memcpy(&fin, got.data(), 8);
    EXPECT_EQ(fin, 2u);
}

// 16 local SGEs of odd lengths, scattered with gaps, some crossing packet boundaries.
struct Scatter {
    std::vector<ibex_sge_t> sges;
    std::vector<std::pair<size_t, size_t>> pieces; // (local offset, length)
    size_t total = 0;
};

Scatter make_scatter(Endpoint &e, size_t base) {
    static const size_t lens[16] = {1, 4095, 3, 4097, 255, 0, 13, 65537, 7, 8191, 1, 3001, 12289, 5, 99, 131071};
    Scatter s;
    size_t off = base;
    for (size_t len : lens) {
        off += 17; // gap
        s.pieces.emplace_back(off, len);
        s.sges.push_back({e.va(off), static_cast<uint32_t>(len), ibex_mr_lkey(e.mr)});
        off += len;
        s.total += len;
    }
    return s;
}

TEST_F(TwoProcess, SixteenSgesGatherAndScatter) {
    Scatter sc = make_scatter(local, 0);
    ASSERT_EQ(sc.sges.size(), 16u);
    const size_t span = sc.pieces.back().first + sc.pieces.back().second + 64;
    ibex_send_wr_t wr{};
    wr.sg_list = sc.sges.data();
    wr.num_sge = 16;
    wr.send_flags = IBEX_SEND_SIGNALED;

    // Gather for WRITE.
    std::memset(local.buf.data(), kFill, span);
    size_t msg = 0;
    for (auto [o, l] : sc.pieces) {
        fill_pattern(local.buf.data() + o, l, 41, msg);
        msg += l;
    }
    ASSERT_EQ(peer.fill_const(0, sc.total + 2 * kGuard, kFill), 0);
    wr.wr_id = 1;
    wr.opcode = IBEX_WR_RDMA_WRITE;
    wr.wr.rdma.remote_addr = peer.va(kGuard);
    wr.wr.rdma.rkey = peer.rkey();
    ASSERT_EQ(ibex_post_send(local.qp, &wr, nullptr), IBEX_OK) << ibex_last_error();
    one_completion(1, IBEX_WC_RDMA_WRITE);
    EXPECT_EQ(peer.verify_pattern(kGuard, sc.total, 41), 0);
    EXPECT_EQ(peer.verify_const(kGuard + sc.total, kGuard, kFill), 0);

    // Gather for SEND into a receive of 7 odd SGEs on the child.
    const std::vector<size_t> rl = {3, 1, 70001, 4093, 9, 77777, 100000};
    std::vector<SgeDesc> rs;
    size_t roff = 0, rtotal = 0;
    for (size_t l : rl) {
        roff += 11;
        rs.push_back({roff, l});
        roff += l;
        rtotal += l;
    }
    ASSERT_GE(rtotal, sc.total);
    ASSERT_EQ(peer.fill_const(0, roff + 64, kFill), 0);
    ASSERT_EQ(peer.post_recv(55, rs), IBEX_OK);
    wr.wr_id = 2;
    wr.opcode = IBEX_WR_SEND_WITH_IMM;
    wr.imm_data = 0xC0FFEE;
    ASSERT_EQ(ibex_post_send(local.qp, &wr, nullptr), IBEX_OK) << ibex_last_error();
    one_completion(2, IBEX_WC_SEND);
    auto rc = peer.wait_recv(1);
    ASSERT_EQ(rc.size(), 1u);
    EXPECT_EQ(rc[0].status, IBEX_WC_SUCCESS);
    EXPECT_EQ(rc[0].byte_len, sc.total);
    EXPECT_EQ(rc[0].imm_data, 0xC0FFEEu);
    size_t m = 0;
    for (const SgeDesc &d : rs) {
        const size_t take = std::min<size_t>(d.len, sc.total - m);
        EXPECT_EQ(peer.verify_pattern(d.off, take, 41, m), 0) << "receive SGE at " << d.off;
        if (take < d.len) {
            EXPECT_EQ(peer.verify_const(d.off + take, d.len - take, kFill), 0);
        }
        if (d.off >= 11) {
            EXPECT_EQ(peer.verify_const(d.off - 11, 11, kFill), 0) << "gap before " << d.off;
        }
        m += take;
    }

    // Scatter for READ: the child's contiguous pattern lands in 16 local pieces.
    ASSERT_EQ(peer.fill_pattern(kGuard, sc.total, 43), 0);
    std::memset(local.buf.data(), kFill, span);
    wr.wr_id = 3;
    wr.opcode = IBEX_WR_RDMA_READ;
    wr.wr.rdma.remote_addr = peer.va(kGuard);
    ASSERT_EQ(ibex_post_send(local.qp, &wr, nullptr), IBEX_OK) << ibex_last_error();
    one_completion(3, IBEX_WC_RDMA_READ);
    msg = 0;
    size_t prev_end = 0;
    for (auto [o, l] : sc.pieces) {
        EXPECT_EQ(check_pattern(local.buf.data() + o, l, 43, msg), 0u) << "local piece at " << o;
        EXPECT_EQ(check_const(local.buf.data() + prev_end, o - prev_end, kFill), 0u) << "gap before " << o;
        prev_end = o + l;
        msg += l;
    }
}

// A chain of WRs in one post: all opcodes, mostly unsignaled. Only signaled ones
// complete, in posting order, and every effect lands.
TEST_F(TwoProcess, ChainedMixedOpcodesSignaledAndUnsignaled) {
    constexpr int kN = 40;
    std::array<ibex_send_wr_t, kN> wrs{};
    std::array<ibex_sge_t, kN> sges{};
    std::vector<uint64_t> signaled_ids;
    int sends = 0;
    const size_t slot = 20000;
    const uint64_t atomic_word = 15 * kMiB; // child word for the atomics
    ASSERT_EQ(peer.fill_const(atomic_word, 8, 0), 0);
    ASSERT_EQ(peer.fill_pattern(14 * kMiB, kN * slot, 99), 0); // READ source
    for (int i = 0; i < kN; ++i) {
        ibex_send_wr_t &w = wrs[i];
        const uint32_t len = static_cast<uint32_t>(1 + (i * 4099) % (slot - 8));
        w.wr_id = 5000 + i;
        w.next = i + 1 < kN ? &wrs[i + 1] : nullptr;
        w.sg_list = &sges[i];
        w.num_sge = 1;
        const bool sig = (i % 7 == 3) || i == kN - 1;
        w.send_flags = sig ? IBEX_SEND_SIGNALED : 0;
        if (sig) signaled_ids.push_back(w.wr_id);
        sges[i] = {local.va(i * slot), len, ibex_mr_lkey(local.mr)};
        switch (i % 5) {
        case 0:
        case 1:
            w.opcode = i % 2 ? IBEX_WR_RDMA_WRITE_WITH_IMM : IBEX_WR_RDMA_WRITE;
            fill_pattern(local.buf.data() + i * slot, len, 200 + i);
            w.wr.rdma.remote_addr = peer.va(i * slot);
            w.wr.rdma.rkey = peer.rkey();
            w.imm_data = i;
            if (w.opcode == IBEX_WR_RDMA_WRITE_WITH_IMM) {
                ASSERT_EQ(peer.post_recv(i, {}), IBEX_OK);
                ++sends;
            }
            break;
        case 2:
            w.opcode = i % 2 ? IBEX_WR_SEND_WITH_IMM : IBEX_WR_SEND;
            fill_pattern(local.buf.data() + i * slot, len, 200 + i);
            w.imm_data = i;
            ASSERT_EQ(peer.post_recv(i, {{i * slot, slot}}), IBEX_OK);
            ++sends;
            break;
        case 3:
            w.opcode = IBEX_WR_RDMA_READ;
            w.wr.rdma.remote_addr = peer.va(14 * kMiB + i * slot);
            w.wr.rdma.rkey = peer.rkey();
            break;
        case 4:
            w.opcode = IBEX_WR_ATOMIC_FETCH_AND_ADD;
            sges[i].length = 8;
            w.wr.atomic.remote_addr = peer.va(atomic_word);
            w.wr.atomic.rkey = peer.rkey();
            w.wr.atomic.compare_add = 1;
            break;
        }
    }
    ibex_send_wr_t *bad = nullptr;
    ASSERT_EQ(ibex_post_send(local.qp, &wrs[0], &bad), IBEX_OK) << ibex_last_error();
    EXPECT_EQ(bad, nullptr);
    auto wc = local.wait(signaled_ids.size(), kOpTimeoutMs);
    ASSERT_EQ(wc.size(), signaled_ids.size());
    for (size_t k = 0; k < wc.size(); ++k) {
        EXPECT_EQ(wc[k].wr_id, signaled_ids[k]) << "completion " << k << " out of order";
        EXPECT_EQ(wc[k].status, IBEX_WC_SUCCESS) << ibex_wc_status_str(wc[k].status);
    }
    // Nothing else may complete.
    EXPECT_TRUE(local.wait(1, 200).empty()) << "an unsignaled WR produced a completion";
    auto rc = peer.wait_recv(sends, kOpTimeoutMs);
    ASSERT_EQ(rc.size(), static_cast<size_t>(sends));
    for (auto &r : rc) EXPECT_EQ(r.status, IBEX_WC_SUCCESS);
    uint64_t fadd_seen = 0;
    for (int i = 0; i < kN; ++i) {
        SCOPED_TRACE(testing::Message() << "wr " << i);
        const uint32_t len = sges[i].length;
        switch (i % 5) {
        case 0:
        case 1:
        case 2: EXPECT_EQ(peer.verify_pattern(i * slot, len, 200 + i), 0); break;
        case 3: EXPECT_EQ(check_pattern(local.buf.data() + i * slot, len, 99, i * slot), 0u); break;
        case 4: {
            uint64_t v;
            std::memcpy(&v, local.buf.data() + i * slot, 8);
            EXPECT_EQ(v, fadd_seen++) << "atomics executed out of order or twice";
            break;
        }
        }
    }
    std::vector<uint8_t> got;
    ASSERT_TRUE(peer.get_bytes(atomic_word, 8, got));
    uint64_t fin;
    std::memcpy(&fin, got.data(), 8);
    EXPECT_EQ(fin, fadd_seen);
}

} // namespace
