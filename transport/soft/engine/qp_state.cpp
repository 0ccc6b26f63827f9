// The state changes of a soft QP that ibex_modify_qp asks for: attributes, RESET (the QP
// forgets its connection), RTR -> RTS (the requester starts at the send PSN with a full
// window) and ERR (everything outstanding is flushed). The provider checks the request
// first; nothing here fails.
#include <algorithm>

#include "transport/soft/codec/roce.h"
#include "transport/soft/engine/context.h"
#include "transport/soft/engine/qp_logic.h"
#include "transport/soft/engine/staging.h"

namespace ibex::soft {

void SoftQp::reset() {
    staging::forget_qp(*ctx, *this);
    sq = Ring<SendWqe>(sq.capacity());
    rq = Ring<RecvWqe>(rq.capacity());
    tx_pos = 0;
    tx_pkt = 0;
    rto_deadline = rnr_until = 0;
    // Go-back-N and ACK bookkeeping of the old connection: a stale `rewound` makes the
    // new connection ignore its first sequence NAK and wait for the transport timeout.
    rewound = false;
    retry_left = retry_cnt;
    rnr_left = rnr_retry;
    unacked_rx = 0;
    ack_psn = 0;
    in_offset = 0;
    in_write = nullptr;
    in_write_len = 0;
    job_count = job_head = 0;
    ack_pending = ack_lazy = nak_sent = false;
    in_msg = InMsg::kNone;
    msn = 0;
    for (auto &r : replays) r.valid = false;
    ooo.clear();
    sack_named = false;
    sack_since = 0;
    resend.reset(0);
    resending = range_started = false;
    tail.stop();
}

namespace {
// Packets of one bandwidth-delay product at this MTU: the selective mode's in-flight cap
// and out-of-order store, a power of two (see OooWindow) between 16 and 1024.
uint32_t bdp_packets(uint32_t bdp_bytes, uint32_t mtu) {
    const uint32_t want = std::clamp<uint32_t>(bdp_bytes / std::max<uint32_t>(mtu, 256), 16, 1024);
    uint32_t n = 16;
    while (n < want) n <<= 1;
    return n;
}
// Room for the largest request packet: BTH, RETH, immediate, pad and ICRC around an MTU.
constexpr uint32_t kHeaderRoom = 64;
} // namespace

void SoftQp::apply(const ibex_qp_attr_t &a, unsigned mask, const NetAddr &peer) {
    const ibex_qp_state_t from = state;
    const ibex_qp_state_t to = (mask & IBEX_QP_STATE) ? a.qp_state : from;
    if (mask & IBEX_QP_ACCESS_FLAGS) access = a.qp_access_flags;
    if (mask & IBEX_QP_PATH_MTU) {
        mtu_enum = static_cast<uint8_t>(a.path_mtu);
        mtu = static_cast<uint32_t>(roce::mtu_bytes(mtu_enum));
    }
    if (mask & IBEX_QP_DEST) {
        dest = peer;
        dest_qpn = a.dest.qpn & roce::kQpnMask;
        ctx->port().peer_added(peer);
        if (!(mask & IBEX_QP_RQ_PSN)) epsn = a.dest.psn & roce::kPsnMask;
        if (!(mask & IBEX_QP_PATH_MTU) && a.dest.mtu >= IBEX_MTU_256 && a.dest.mtu < mtu_enum) {
            mtu_enum = a.dest.mtu;
            mtu = static_cast<uint32_t>(roce::mtu_bytes(mtu_enum));
        }
    }
    if (mask & IBEX_QP_RQ_PSN) epsn = a.rq_psn & roce::kPsnMask;
    if (mask & IBEX_QP_SQ_PSN) sq_psn = a.sq_psn & roce::kPsnMask;
    apply_limits(a, mask);
    // The live budgets start full with the limits RTR -> RTS sets.
    if (mask & IBEX_QP_RETRY_CNT) retry_left = retry_cnt;
    if (mask & IBEX_QP_RNR_RETRY) rnr_left = rnr_retry;

    if (to == IBEX_QPS_ERR) {
        qp_to_error(*this);
        return;
    }
    if (to == IBEX_QPS_RESET) reset();
    if (to == IBEX_QPS_RTR && from != IBEX_QPS_RTR) {
        // The out-of-order store is sized here, once per connection, never per packet.
        const EngineConfig &cfg = ctx->config();
        mode = cfg.retransmit;
        if (mode == RetransmitMode::kSelective)
            ooo.configure(bdp_packets(cfg.bdp_bytes, mtu), mtu + kHeaderRoom);
        else
            ooo.configure(0, 0);
        sack_named = false;
        sack_since = 0;
    }
    if (to == IBEX_QPS_RTS && from == IBEX_QPS_RTR) {
        una = sent_high = sq_psn;
        const EngineConfig &cfg = ctx->config();
        mode = cfg.retransmit;
        const bool selective = mode == RetransmitMode::kSelective;
        inflight_cap = selective ? bdp_packets(cfg.bdp_bytes, mtu) : 0;
        tail.set_rto_low(selective ? uint64_t(cfg.rto_low_us) * 1000 : 0);
        tail.stop();
        resend.reset(una);
        resending = range_started = false;
        window.update(SoftContext::now_ns(), {cc::EventType::kStart});
        retry_left = retry_cnt;
        rnr_left = rnr_retry;
    }
    state = to;
}

} // namespace ibex::soft
