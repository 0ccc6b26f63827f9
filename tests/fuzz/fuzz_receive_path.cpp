// libFuzzer target for the whole soft RoCEv2 receive path: parse, ICRC, QP lookup,
// PSN/duplicate handling, key/bounds/rights checks, placement, and the responses that
// follow (progress_once builds them and "sends" them to a fake port, which checks them).
//
// Each input builds a fresh context on a FakePort (no socket) with three RC QPs, then
// feeds the records of the input (format: fuzz_format.h). Invariants, abort() on breach:
//   - the guard bytes around both registered regions never change (no write outside a
//     registered region);
//   - every packet the engine transmits has consistent lengths, lies in engine memory or
//     inside a registered region, parses, carries a correct ICRC and ECT(0);
// plus everything ASan/UBSan/LSan catch (heap overflows on the exact-size packet copy,
// leaks across the per-input teardown) and libFuzzer's own timeout.
#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#include <ibex/ibex.h>

#include "tests/fuzz/fuzz_format.h"
#include "transport/provider.h"
#include "transport/soft/codec/icrc.h"
#include "transport/soft/codec/packet.h"
#include "transport/soft/codec/roce.h"
#include "transport/soft/engine/context.h"
#include "transport/soft/engine/objects.h"
#include "transport/soft/port.h"

using namespace ibex::fuzz;
using namespace ibex::roce;
using ibex::soft::NetAddr;
using ibex::soft::RxPacket;
using ibex::soft::SoftContext;
using ibex::soft::SoftQp;
using ibex::soft::TxPacket;

namespace {

[[noreturn]] void die(const char *what) {
    std::fprintf(stderr, "fuzz_receive_path: invariant broken: %s\n", what);
    std::abort();
}

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) die(#cond);                                                                   \
    } while (0)

// A registered buffer with guard bytes on both sides.
struct Arena {
    uint8_t *mem = nullptr;
    uint8_t expect[2][kGuardLen]; // what the guards must hold
    Arena() {
        mem = static_cast<uint8_t *>(std::aligned_alloc(4096, kGuardLen + kRegionLen + kGuardLen));
        if (!mem) die("aligned_alloc");
        for (size_t i = 0; i < kGuardLen; ++i) {
            expect[0][i] = static_cast<uint8_t>(0xa5 ^ (i * 31));
            expect[1][i] = static_cast<uint8_t>(0x5a ^ (i * 17));
        }
        std::memcpy(mem, expect[0], kGuardLen);
        std::memcpy(mem + kGuardLen + kRegionLen, expect[1], kGuardLen);
        std::memset(region(), 0x11, kRegionLen);
    }
    ~Arena() { std::free(mem); }
    Arena(const Arena &) = delete;
    Arena &operator=(const Arena &) = delete;
    uint8_t *region() const { return mem + kGuardLen; }
    uintptr_t begin() const { return reinterpret_cast<uintptr_t>(mem); }
    uintptr_t end() const { return begin() + kGuardLen + kRegionLen + kGuardLen; }
    // memcmp, not a loop: a byte loop would be coverage-instrumented and cost most of
    // the fuzzer's time.
    void check_guards() const {
        if (std::memcmp(mem, expect[0], kGuardLen) != 0) die("guard before a registered region changed");
        if (std::memcmp(mem + kGuardLen + kRegionLen, expect[1], kGuardLen) != 0)
            die("guard after a registered region changed");
    }
    // A transmitted piece either lies outside the arena or entirely inside the region.
    void check_piece(const void *p, size_t len) const {
        const uintptr_t a = reinterpret_cast<uintptr_t>(p);
        if (a + len <= begin() || a >= end()) return;
        const uintptr_t r = reinterpret_cast<uintptr_t>(region());
        if (a < r || a + len > r + kRegionLen) die("transmitted bytes come from outside a registered region");
    }
};

Arena *g_target; // remote rights
Arena *g_local;  // local write only

// Parts of the local-only region that nothing may write: no posted receive, READ or
// atomic result lands there, and the region grants no remote rights, so a remote WRITE
// or atomic aimed at it must be refused before a byte changes.
constexpr size_t kLocalUntouched[2][2] = {{0, 4096}, {50016, kRegionLen}};
constexpr uint8_t kLocalFill = 0x22;

void check_local_untouched() {
    for (const auto &range : kLocalUntouched)
        for (size_t i = range[0]; i < range[1]; i += 64) {
            static const auto fill = [] {
                std::array<uint8_t, 64> f;
                f.fill(kLocalFill);
                return f;
            }();
            const size_t n = range[1] - i < 64 ? range[1] - i : 64;
            if (std::memcmp(g_local->region() + i, fill.data(), n) != 0)
                die("a part of the local-only region that nothing may write changed");
        }
}

// Path MTU of QPs A, B, C.
constexpr ibex_mtu_t kMtus[3] = {IBEX_MTU_1024, IBEX_MTU_256, IBEX_MTU_4096};

class FakePort final : public ibex::soft::Port {
public:
    NetAddr local() const override { return {kLocalIp, kPort}; }
    uint8_t max_mtu() const override { return 5; }
    void send(std::span<const TxPacket> pkts) override {
        for (const TxPacket &p : pkts) check(p);
    }
    int recv(std::span<RxPacket>) override { return 0; }
    int wait_fd() const override { return -1; }
    size_t sent = 0;

private:
    void check(const TxPacket &p) {
        ++sent;
        CHECK(p.npieces >= 1 && p.npieces <= ibex::soft::kMaxTxPieces);
        size_t total = 0;
        for (int i = 0; i < p.npieces; ++i) {
            g_target->check_piece(p.pieces[i].iov_base, p.pieces[i].iov_len);
            g_local->check_piece(p.pieces[i].iov_base, p.pieces[i].iov_len);
            total += p.pieces[i].iov_len;
        }
        CHECK(total == p.len);
        CHECK(p.len >= kBthLen + kIcrcLen && p.len <= kMaxHeaderLen + 4096 + kIcrcLen);
        CHECK((p.tos & 3) == 2); // ECT(0)
        CHECK(p.dst == (NetAddr{kPeerIp, kPort}));
        // Gather into an exact-size buffer (ASan sees any read past a piece) and check it.
        std::unique_ptr<uint8_t[]> buf(new uint8_t[p.len]);
        size_t off = 0;
        for (int i = 0; i < p.npieces; ++i) {
            if (p.pieces[i].iov_len) std::memcpy(buf.get() + off, p.pieces[i].iov_base, p.pieces[i].iov_len);
            off += p.pieces[i].iov_len;
        }
        PacketView pv;
        CHECK(parse_packet(buf.get(), p.len, &pv) == ParseError::kOk);
        // QP i sends to peer QPN kPeerQpn + i with the MTU it was given; FIRST and MIDDLE
        // packets carry exactly one MTU, the others at most one.
        CHECK(pv.bth.dest_qp >= kPeerQpn && pv.bth.dest_qp < kPeerQpn + 3);
        const uint32_t mtu = static_cast<uint32_t>(mtu_bytes(static_cast<uint8_t>(kMtus[pv.bth.dest_qp - kPeerQpn])));
        if ((pv.flags & (kFirst | kMiddle)) && !(pv.flags & kLast)) CHECK(pv.payload_len == mtu);
        CHECK(pv.payload_len <= mtu);
        IcrcIpv4Fields f;
        f.src_ip = kLocalIp;
        f.src_port = kPort;
        f.dst_ip = kPeerIp;
        f.dst_port = kPort;
        const iovec whole{buf.get(), pv.transport_len};
        CHECK(icrc_ipv4(f, std::span<const iovec>(&whole, 1), pv.transport_len) == pv.icrc);
    }
};

#define OK(expr)                                                                                   \
    do {                                                                                           \
        if ((expr) != IBEX_OK) {                                                                   \
            std::fprintf(stderr, "fuzz setup: %s: %s\n", #expr, ibex_last_error());                \
            std::abort();                                                                          \
        }                                                                                          \
    } while (0)

constexpr unsigned kRemoteAll = IBEX_ACCESS_REMOTE_WRITE | IBEX_ACCESS_REMOTE_READ | IBEX_ACCESS_REMOTE_ATOMIC;

struct Rig {
    SoftContext *ctx = nullptr;
    FakePort *port = nullptr;
    ibex_pd_t *pd = nullptr;
    ibex_mr_t *mr_target = nullptr;
    ibex_mr_t *mr_local = nullptr;
    ibex_cq_t *cq = nullptr;
    ibex_qp_t *qp[3] = {};

    Rig() {
        ibex::soft::EngineConfig cfg;
        cfg.progress_thread = false;
        auto p = std::make_unique<FakePort>();
        port = p.get();
        ctx = new SoftContext(std::move(p), cfg);
        ctx->ops = &ibex::kSoftProviderOps;
        ctx->device_name = "fuzz";
        // Same memory at the start of every input, so a saved input replays the same way.
        std::memset(g_target->region(), 0x11, kRegionLen);
        std::memset(g_local->region(), kLocalFill, kRegionLen);
        OK(ibex_alloc_pd(ctx, &pd));
        OK(ibex_reg_mr(pd, g_target->region(), kRegionLen, IBEX_ACCESS_LOCAL_WRITE | kRemoteAll, &mr_target));
        OK(ibex_reg_mr(pd, g_local->region(), kRegionLen, IBEX_ACCESS_LOCAL_WRITE, &mr_local));
        OK(ibex_create_cq(ctx, 512, &cq));
        // A: requester with outstanding work, MTU 1024; B: responder, MTU 256;
        // C: RTR only (never RTS), MTU 4096, QP allows remote write only.
        const unsigned access[3] = {kRemoteAll, kRemoteAll, IBEX_ACCESS_REMOTE_WRITE};
        for (int i = 0; i < 3; ++i) {
            ibex_qp_init_attr_t ia = IBEX_QP_INIT_ATTR_INIT;
            ia.send_cq = cq;
            ia.recv_cq = cq;
            ia.max_send_wr = 16;
            ia.max_recv_wr = 16;
            OK(ibex_create_qp(pd, &ia, &qp[i]));
            ibex_qp_attr_t a = IBEX_QP_ATTR_INIT;
            a.qp_state = IBEX_QPS_INIT;
            a.qp_access_flags = access[i];
            OK(ibex_modify_qp(qp[i], &a, IBEX_QP_STATE | IBEX_QP_ACCESS_FLAGS));
            a.qp_state = IBEX_QPS_RTR;
            std::memset(a.dest.gid, 0, sizeof a.dest.gid);
            a.dest.gid[10] = a.dest.gid[11] = 0xff;
            put32(a.dest.gid + 12, kPeerIp);
            a.dest.udp_port = kPort;
            a.dest.mtu = IBEX_MTU_4096;
            a.dest.qpn = kPeerQpn + uint32_t(i);
            a.dest.psn = kRqPsn;
            a.path_mtu = kMtus[i];
            a.rq_psn = kRqPsn;
            a.min_rnr_timer = 1;
            OK(ibex_modify_qp(qp[i], &a,
                              IBEX_QP_STATE | IBEX_QP_DEST | IBEX_QP_PATH_MTU | IBEX_QP_RQ_PSN | IBEX_QP_MIN_RNR_TIMER));
            if (i == 2) continue;
            a.qp_state = IBEX_QPS_RTS;
            a.sq_psn = kPsnA + uint32_t(i) * 0x1000;
            a.timeout = 0; // no transport timer: inputs replay deterministically
            a.retry_cnt = 2;
            a.rnr_retry = 2;
            OK(ibex_modify_qp(qp[i], &a,
                              IBEX_QP_STATE | IBEX_QP_SQ_PSN | IBEX_QP_TIMEOUT | IBEX_QP_RETRY_CNT | IBEX_QP_RNR_RETRY));
        }
        // Receives: a few per QP, one of them with two SGEs; local region only.
        uint64_t id = 100;
        for (int i = 0; i < 3; ++i) {
            for (int k = 0; k < 4; ++k) {
                const size_t off = 4096 + size_t(i) * 12288 + size_t(k) * 3000;
                ibex_sge_t s[2] = {{va_local(off), k == 3 ? 700u : 2900u, ibex_mr_lkey(mr_local)},
                                   {va_local(off + 800), 2000u, ibex_mr_lkey(mr_local)}};
                ibex_recv_wr_t r{};
                r.wr_id = id++;
                r.sg_list = s;
                r.num_sge = k == 3 ? 2 : 1;
                OK(ibex_post_recv(qp[i], &r, nullptr));
            }
        }
        // QP A's outstanding work (see fuzz_format.h); sent at once to the fake port.
        post(IBEX_WR_SEND, 0, 1500);
        post(IBEX_WR_RDMA_WRITE, 2000, 100);
        post(IBEX_WR_RDMA_READ, 40000, kAReadLen);
        post(IBEX_WR_ATOMIC_CMP_AND_SWP, 50000, 8);
        post(IBEX_WR_ATOMIC_FETCH_AND_ADD, 50008, 8);
        post(IBEX_WR_SEND_WITH_IMM, 3000, 10);
    }

    uint64_t va_local(size_t off) const { return reinterpret_cast<uintptr_t>(g_local->region()) + off; }

    void post(ibex_wr_opcode_t op, size_t off, uint32_t len) {
        ibex_sge_t s{va_local(off), len, ibex_mr_lkey(mr_local)};
        ibex_send_wr_t wr{};
        wr.wr_id = 1000 + op;
        wr.sg_list = &s;
        wr.num_sge = 1;
        wr.opcode = op;
        wr.send_flags = IBEX_SEND_SIGNALED;
        wr.imm_data = 0x12345678;
        const uint64_t remote = 0x7f0000001000ull; // the peer's memory: opaque here
        wr.wr.rdma.remote_addr = remote;
        wr.wr.rdma.rkey = 0x1234;
        if (op == IBEX_WR_ATOMIC_CMP_AND_SWP || op == IBEX_WR_ATOMIC_FETCH_AND_ADD) {
            wr.wr.atomic.remote_addr = remote;
            wr.wr.atomic.rkey = 0x1234;
            wr.wr.atomic.compare_add = 5;
            wr.wr.atomic.swap = 9;
        }
        OK(ibex_post_send(qp[0], &wr, nullptr));
    }

    void drain() {
        ibex_wc_t wc[64];
        for (int round = 0; round < 64; ++round) {
            int n = 0;
            OK(ibex_poll_cq(cq, 64, wc, &n));
            for (int i = 0; i < n; ++i) CHECK(wc[i].status >= IBEX_WC_SUCCESS && wc[i].status <= IBEX_WC_GENERAL_ERR);
            if (n == 0) return;
        }
    }

    ~Rig() {
        drain();
        for (ibex_qp_t *q : qp) OK(ibex_destroy_qp(q));
        OK(ibex_destroy_cq(cq));
        OK(ibex_dereg_mr(mr_target));
        OK(ibex_dereg_mr(mr_local));
        OK(ibex_dealloc_pd(pd));
        OK(ibex_close_device(ctx));
    }
};

void patch(Rig &rig, uint8_t ctl, uint8_t sel, int8_t delta, uint8_t *pkt, size_t len) {
    if (len < kBthLen) return;
    const uint8_t opcode = pkt[0];
    const uint16_t flags = op_info(opcode).flags;
    SoftQp *qp = nullptr;
    if ((sel & 3) != kSelRaw) {
        qp = static_cast<SoftQp *>(rig.qp[sel & 3]);
        put24(pkt + 5, qp->qp_num);
    }
    if ((ctl & kCtlPatchPsn) && qp) {
        const uint32_t base = (flags & kIsRequest) ? qp->epsn : qp->una;
        put24(pkt + 9, psn_add(base, static_cast<uint32_t>(int32_t(delta)) & kPsnMask));
    }
    if ((ctl & kCtlPatchKey) && (flags & (kHasReth | kHasAtomicEth)) && len >= kBthLen + 12) {
        const ibex_mr_t *mr = (ctl & kCtlLocalMr) ? rig.mr_local : rig.mr_target;
        uint8_t *h = pkt + kBthLen; // RETH and AtomicETH both start VA(8) R_Key(4)
        const uint64_t base = reinterpret_cast<uintptr_t>(mr->addr);
        put64(h, base + get16(h + 6) - kVaBias);
        put32(h + 8, mr->rkey);
    }
}

} // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
    // The fuzz target must not pick up fault injection or chatty logging from the caller.
    unsetenv("IBEX_FAULT_LOSS");
    unsetenv("IBEX_FAULT_REORDER");
    unsetenv("IBEX_FAULT_DUPLICATE");
    unsetenv("IBEX_FAULT_CORRUPT");
    setenv("IBEX_LOG_LEVEL", "error", 1);
    g_target = new Arena;
    g_local = new Arena;
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    Rig rig;
    size_t pos = 0;
    for (size_t rec = 0; rec < kMaxRecords && size - pos >= kRecordHeader; ++rec) {
        const uint8_t ctl = data[pos];
        const uint8_t sel = data[pos + 1];
        const int8_t delta = static_cast<int8_t>(data[pos + 2]);
        size_t len = get16(data + pos + 3);
        pos += kRecordHeader;
        if (len > size - pos) len = size - pos;
        // An exact-size heap copy: ASan flags any read past the end of the packet.
        std::unique_ptr<uint8_t[]> pkt(new uint8_t[len ? len : 1]);
        if (len) std::memcpy(pkt.get(), data + pos, len);
        pos += len;

        patch(rig, ctl, sel, delta, pkt.get(), len);
        RxPacket rx;
        rx.data = pkt.get();
        rx.len = static_cast<uint32_t>(len);
        rx.src = {kPeerIp, static_cast<uint16_t>((ctl & kCtlWrongSrc) ? kPort + 1 : kPort)};
        rx.dst = {kLocalIp, kPort};
        rx.ip_id = 0;
        rx.ip_frag = 0x4000;
        rx.tos = (ctl & kCtlCeMark) ? 3 : 2;
        if (!(ctl & kCtlRaw) && len >= kIcrcLen)
            store_icrc(pkt.get() + len - kIcrcLen, ibex::soft::rx_icrc(rx, len - kIcrcLen));
        {
            std::lock_guard<std::mutex> lock(rig.ctx->mutex());
            rig.ctx->receive(rx);
            if (!(ctl & kCtlNoProgress)) rig.ctx->progress_once();
        }
        g_target->check_guards();
        g_local->check_guards();
        check_local_untouched();
        if (ctl & kCtlPollCq) rig.drain();
    }
    {
        std::lock_guard<std::mutex> lock(rig.ctx->mutex());
        for (int i = 0; i < 4; ++i) rig.ctx->progress_once();
    }
    g_target->check_guards();
    g_local->check_guards();
    check_local_untouched();
    return 0;
}
