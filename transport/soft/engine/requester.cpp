// Requester side of a soft RC QP: turns send WQEs into packets, tracks the oldest
// unacknowledged PSN (`una`), completes WQEs in order as ACKs and responses arrive, and
// goes back to `una` (go-back-N) on a sequence NAK, an RNR NAK or a timeout. In selective
// mode a selective NAK's range, or a missing response, is resent alone (the cursor visits
// the range and comes back), in flight stays under the BDP cap, and a lost tail is resent
// after RTO_low (engine/loss_recovery.h).
#include <algorithm>

#include "transport/soft/codec/roce.h"
#include "transport/soft/engine/qp_logic.h"
#include "transport/soft/engine/staging.h"

namespace ibex::soft {

using namespace ibex::roce;

namespace {

// The send window (congestion/window) hears of every acknowledgement, sequence NAK and
// timeout; requester_transmit keeps no more packets in flight than it allows.
void window_event(SoftQp &qp, uint64_t now, cc::EventType type) { qp.window.update(now, {type}); }

void resent(SoftContext &ctx, SoftQp &qp) {
    ++ctx.counters().retransmitted_packets;
    ++qp.rtx.packets_resent;
}

bool is_read(const SendWqe &w) { return w.opcode == IBEX_WR_RDMA_READ; }
bool is_atomic(const SendWqe &w) {
    return w.opcode == IBEX_WR_ATOMIC_CMP_AND_SWP || w.opcode == IBEX_WR_ATOMIC_FETCH_AND_ADD;
}
bool needs_response(const SendWqe &w) { return is_read(w) || is_atomic(w); }
uint32_t last_psn(const SendWqe &w) { return psn_add(w.first_psn, w.npkts - 1); }

ibex_wc_opcode_t wc_opcode(uint8_t wr_opcode) {
    switch (wr_opcode) {
    case IBEX_WR_RDMA_WRITE:
    case IBEX_WR_RDMA_WRITE_WITH_IMM: return IBEX_WC_RDMA_WRITE;
    case IBEX_WR_SEND:
    case IBEX_WR_SEND_WITH_IMM: return IBEX_WC_SEND;
    case IBEX_WR_RDMA_READ: return IBEX_WC_RDMA_READ;
    case IBEX_WR_ATOMIC_CMP_AND_SWP: return IBEX_WC_COMP_SWAP;
    default: return IBEX_WC_FETCH_ADD;
    }
}

uint8_t request_opcode(const SendWqe &w, bool first, bool last) {
    const bool imm = w.opcode == IBEX_WR_SEND_WITH_IMM || w.opcode == IBEX_WR_RDMA_WRITE_WITH_IMM;
    if (w.opcode == IBEX_WR_SEND || w.opcode == IBEX_WR_SEND_WITH_IMM) {
        if (first && last) return imm ? kSendOnlyImm : kSendOnly;
        if (first) return kSendFirst;
        if (last) return imm ? kSendLastImm : kSendLast;
        return kSendMiddle;
    }
    if (first && last) return imm ? kWriteOnlyImm : kWriteOnly;
    if (first) return kWriteFirst;
    if (last) return imm ? kWriteLastImm : kWriteLast;
    return kWriteMiddle;
}

bool selective(const SoftQp &qp) { return qp.mode == RetransmitMode::kSelective; }

// The PSN of the next packet the cursor (tx_pos, tx_pkt) sends.
uint32_t cursor_psn(SoftQp &qp) {
    return qp.tx_pos < qp.sq.tail() ? psn_add(qp.sq.at(qp.tx_pos).first_psn, qp.tx_pkt) : qp.sq_psn;
}

// Nothing left to send: every posted request is out and no range waits to be resent.
bool sent_all(const SoftQp &qp) { return qp.tx_pos == qp.sq.tail() && !qp.resending; }
// Nothing new will reach the responder until an acknowledgement comes: everything is sent,
// or the window (the in-flight cap) is full. Either way no later packet can make the
// responder repeat a selective NAK, so a lost resend is found by the tail timer's probe
// and not by the transport timeout (tens of ms at the usual timeout 14).
bool stalled(const SoftQp &qp) { return sent_all(qp) || qp.window_full; }

uint32_t packets_in_flight(const SoftQp &qp) { return static_cast<uint32_t>(std::max(0, psn_diff(qp.sent_high, qp.una))); }

// Puts the cursor on `psn` (never before una). Walks the unacknowledged WQEs: bounded by
// the send queue, and done once per NAK, not per packet.
void seek(SoftQp &qp, uint32_t psn) {
    if (psn_diff(psn, qp.una) < 0) psn = qp.una;
    for (uint64_t pos = qp.sq.head(); pos < qp.sq.tail(); ++pos) {
        const SendWqe &w = qp.sq.at(pos);
        const int32_t off = psn_diff(psn, w.first_psn);
        if (off < static_cast<int32_t>(w.npkts)) {
            qp.tx_pos = pos;
            qp.tx_pkt = off > 0 ? static_cast<uint32_t>(off) : 0;
            return;
        }
    }
    qp.tx_pos = qp.sq.tail();
    qp.tx_pkt = 0;
}

// Selective mode: [begin, end) is missing at the responder. The cursor leaves for it at
// the next transmit and comes back to where it was.
void resend_range(SoftQp &qp, uint32_t begin, uint32_t end) {
    if (!qp.resend.add(begin, end) || qp.resending) return;
    qp.resending = true;
    qp.range_started = false;
    qp.resume_psn = cursor_psn(qp);
}

// Moves the cursor to the next PSN to resend, or back to resume_psn once every range
// has been sent.
void next_resend(SoftQp &qp) {
    while (qp.resending) {
        if (qp.resend.empty()) {
            qp.resending = false;
            seek(qp, qp.resume_psn);
            return;
        }
        const RetransmitSet::Range &r = qp.resend.front();
        if (!qp.range_started) {
            seek(qp, r.begin);
            qp.range_started = true;
        }
        if (qp.tx_pos < qp.sq.tail() && psn_diff(cursor_psn(qp), r.end) < 0) return;
        qp.resend.pop();
        qp.range_started = false;
    }
}

bool outstanding(const SoftQp &qp) { return qp.sq.head() < qp.tx_pos || (qp.tx_pos < qp.sq.tail() && qp.tx_pkt > 0); }

void rearm(SoftQp &qp, uint64_t now) {
    const uint64_t t = transport_timeout_ns(qp.timeout);
    qp.rto_deadline = (t && outstanding(qp)) ? now + t : 0;
}

// Go back to `una`: the next packet sent is the oldest unacknowledged one. `force` is for
// timeouts; otherwise a repeated trigger for the same `una` is ignored so one loss costs
// one rewind, not one per packet that follows it.
void rewind(SoftQp &qp, bool force) {
    if (qp.sq.empty()) return;
    if (qp.rewound && !force) return;
    qp.rewound = true;
    qp.resend.reset(qp.una); // everything from una goes again anyway
    qp.resending = qp.range_started = false;
    const SendWqe &w = qp.sq.front();
    qp.tx_pos = qp.sq.head();
    qp.tx_pkt = static_cast<uint32_t>(psn_diff(qp.una, w.first_psn));
    if (qp.tx_pkt >= w.npkts) qp.tx_pkt = 0;
}

void progressed(SoftQp &qp, uint64_t now) {
    qp.retry_left = qp.retry_cnt;
    qp.rnr_left = qp.rnr_retry;
    qp.rewound = false;
    window_event(qp, now, cc::EventType::kAcked);
    rearm(qp, now);
    if (qp.resending && qp.resend.acked(qp.una)) qp.range_started = false;
    qp.tail.update(now, packets_in_flight(qp), true, stalled(qp));
}

// A READ or atomic response is missing: back to una in both modes. The requester drops
// the responses that follow a missing one, so resending the one request alone would
// leave theirs to be asked for one round trip (or timeout) at a time.
void response_lost(SoftQp &qp) { rewind(qp, false); }

// A selective NAK: the responder holds what follows and misses exactly [begin, end).
void on_selective_nak(SoftContext &ctx, SoftQp &qp, uint32_t begin, uint32_t end) {
    if (psn_diff(end, begin) <= 0 || psn_diff(end, qp.sent_high) > 0) {
        ++ctx.counters().rx_dropped_malformed; // names PSNs never sent
        return;
    }
    if (psn_diff(end, qp.una) <= 0) return; // stale: acknowledged meanwhile
    if (psn_diff(begin, qp.una) < 0) begin = qp.una;
    resend_range(qp, begin, end);
}

// After WQEs complete, a cursor left behind them (by an earlier rewind) moves up to una.
void fix_cursor(SoftQp &qp) {
    if (qp.tx_pos < qp.sq.head()) {
        qp.tx_pos = qp.sq.head();
        qp.tx_pkt = 0;
    }
    if (qp.tx_pos == qp.sq.head() && !qp.sq.empty()) {
        const SendWqe &w = qp.sq.front();
        const int32_t off = psn_diff(qp.una, w.first_psn);
        if (off > 0 && static_cast<uint32_t>(off) > qp.tx_pkt && static_cast<uint32_t>(off) < w.npkts)
            qp.tx_pkt = static_cast<uint32_t>(off);
    }
}

// Completes SEND/WRITE WQEs acknowledged through `acked` (inclusive). Returns false if
// the acknowledgement covers a READ or atomic whose response never came (lost).
bool ack_through(SoftQp &qp, uint32_t acked, uint64_t now) {
    bool moved = false;
    bool lost_response = false;
    while (!qp.sq.empty()) {
        SendWqe &w = qp.sq.front();
        if (psn_diff(w.first_psn, acked) > 0) break;
        if (needs_response(w)) {
            lost_response = true;
            break;
        }
        if (psn_diff(last_psn(w), acked) > 0) {
            const uint32_t next = psn_add(acked, 1);
            if (psn_diff(next, qp.una) > 0) {
                qp.una = next;
                moved = true;
            }
            break;
        }
        qp.una = psn_add(last_psn(w), 1);
        complete_send(qp, w, IBEX_WC_SUCCESS);
        qp.sq.pop();
        moved = true;
    }
    fix_cursor(qp);
    if (moved) progressed(qp, now);
    return !lost_response;
}

// A response at `psn` implies the responder executed everything before it.
void complete_before(SoftQp &qp, uint32_t psn, uint64_t now) { ack_through(qp, psn_add(psn, kPsnMask), now); }

void fail_head(SoftQp &qp, ibex_wc_status_t status) {
    if (!qp.sq.empty()) {
        complete_send(qp, qp.sq.front(), status);
        qp.sq.pop();
    }
    qp_to_error(qp);
}

// A response for a PSN never sent is forged or corrupt: it must not complete anything.
bool beyond_sent(SoftContext &ctx, const SoftQp &qp, uint32_t psn) {
    if (psn_diff(psn, qp.sent_high) < 0) return false;
    ++ctx.counters().rx_dropped_malformed;
    return true;
}

void on_read_response(SoftContext &ctx, SoftQp &qp, const PacketView &pv, uint64_t now) {
    const uint32_t q = pv.bth.psn;
    if (qp.sq.empty() || psn_diff(q, qp.una) < 0) return; // duplicate
    if (beyond_sent(ctx, qp, q)) return;
    complete_before(qp, q, now);
    if (qp.sq.empty()) return;
    SendWqe &w = qp.sq.front();
    if (!is_read(w) || q != qp.una) {
        response_lost(qp);
        return;
    }
    const uint32_t k = static_cast<uint32_t>(psn_diff(q, w.first_psn));
    const uint32_t total = w.local.total;
    const uint32_t off = k * qp.mtu;
    const uint32_t expect = std::min<uint32_t>(qp.mtu, total - off);
    if (k >= w.npkts || pv.payload_len != expect) {
        ++ctx.counters().rx_dropped_malformed;
        return;
    }
    w.local.scatter(off, pv.payload, expect);
    qp.una = psn_add(q, 1);
    if (k + 1 == w.npkts) {
        complete_send(qp, w, IBEX_WC_SUCCESS);
        qp.sq.pop();
    }
    fix_cursor(qp);
    progressed(qp, now);
}

void on_atomic_ack(SoftContext &ctx, SoftQp &qp, const PacketView &pv, uint64_t now) {
    const uint32_t q = pv.bth.psn;
    if (qp.sq.empty() || psn_diff(q, qp.una) < 0) return;
    if (beyond_sent(ctx, qp, q)) return;
    complete_before(qp, q, now);
    if (qp.sq.empty()) return;
    SendWqe &w = qp.sq.front();
    if (!is_atomic(w) || q != qp.una || w.first_psn != q) {
        response_lost(qp);
        return;
    }
    const uint64_t orig = pv.atomic_orig;
    w.local.scatter(0, reinterpret_cast<const uint8_t *>(&orig), sizeof orig);
    qp.una = psn_add(q, 1);
    complete_send(qp, w, IBEX_WC_SUCCESS);
    qp.sq.pop();
    fix_cursor(qp);
    progressed(qp, now);
}

ibex_wc_status_t nak_status(uint8_t code) {
    switch (code) {
    case kNakInvalidRequest: return IBEX_WC_REM_INV_REQ_ERR;
    case kNakRemoteAccess: return IBEX_WC_REM_ACCESS_ERR;
    case kNakRemoteOperational: return IBEX_WC_REM_OP_ERR;
    case kNakInvalidRdRequest: return IBEX_WC_REM_INV_RD_REQ_ERR;
    default: return IBEX_WC_BAD_RESP_ERR;
    }
}

void on_acknowledge(SoftContext &ctx, SoftQp &qp, const PacketView &pv, uint64_t now) {
    const uint32_t psn = pv.bth.psn;
    if (beyond_sent(ctx, qp, psn)) return;
    switch (pv.aeth.kind()) {
    case kAethAck:
        if (!ack_through(qp, psn, now)) response_lost(qp);
        return;
    case kAethRnrNak: {
        ++ctx.counters().rnr_nak_received;
        ack_through(qp, psn_add(psn, kPsnMask), now); // everything before psn
        if (qp.sq.empty() || qp.una != psn) return;
        if (qp.rnr_retry != 7 && qp.rnr_left-- <= 0) {
            fail_head(qp, IBEX_WC_RNR_RETRY_EXC_ERR);
            return;
        }
        rewind(qp, true);
        qp.rnr_until = now + uint64_t(rnr_timer_us(pv.aeth.value())) * 1000;
        rearm(qp, qp.rnr_until);
        return;
    }
    case kAethNak: {
        ack_through(qp, psn_add(psn, kPsnMask), now);
        if (qp.sq.empty()) return;
        const uint8_t code = pv.aeth.value();
        if (code == kNakPsnSeqError) {
            ++ctx.counters().packet_seq_err;
            ++qp.rtx.naks_received;
            // A go-back-N responder (a real RNIC) never sets the mark: its NAK means
            // everything from psn on was dropped, and is handled as go-back-N below.
            if (selective(qp) && (pv.bth.resv7 & kBthSelectiveNak))
                return on_selective_nak(ctx, qp, psn, pv.aeth.msn & kPsnMask);
            if (qp.una != psn) return; // stale NAK
            if (qp.rewound) return;    // already going back to this PSN
            if (qp.retry_left-- <= 0) {
                fail_head(qp, IBEX_WC_RETRY_EXC_ERR);
                return;
            }
            window_event(qp, now, cc::EventType::kSequenceNak);
            rewind(qp, false);
            return;
        }
        // A fatal NAK names the PSN of the request that failed.
        const SendWqe &w = qp.sq.front();
        if (psn_diff(psn, w.first_psn) < 0 || psn_diff(psn, last_psn(w)) > 0) return;
        fail_head(qp, nak_status(code));
        return;
    }
    default: ++ctx.counters().rx_dropped_malformed; return;
    }
}

// `fills_window`: no request follows this one until an acknowledgement opens the window,
// so it asks for one; otherwise a window that ends between two periodic AckReqs leaves
// its tail unacknowledged until the transport timer fires (the responder acknowledges
// only what asks for it), and the QP moves one window per timeout.
void emit_request(SoftContext &ctx, SoftQp &qp, SendWqe &w, uint32_t k, bool fills_window) {
    auto &slot = ctx.begin_tx();
    const uint32_t psn = psn_add(w.first_psn, k);
    const uint32_t total = w.local.total;
    const uint32_t off = k * qp.mtu;
    const uint32_t len = std::min<uint32_t>(qp.mtu, total - off);
    const bool first = k == 0;
    const bool last = k + 1 == w.npkts;
    const uint8_t op = request_opcode(w, first, last);
    const uint16_t flags = op_info(op).flags;
    // The end of a message asks for an ACK when its completion will be waited for (a
    // signaled WR), or when the send queue is half full of WRs that only an ACK frees. An
    // unsignaled WR's ACK can come lazily (EngineConfig::ack_lazy_us), usually in the
    // batch of the peer's next request, instead of in a datagram of its own.
    const bool wants_ack = w.signaled || qp.sig_all || qp.sq.size() * 2 >= qp.sq.capacity();
    const bool ack_req = (last && wants_ack) || fills_window || ((k + 1) % ctx.config().ack_req_every == 0);
    size_t h = put_bth(slot.hdr, op, qp.dest_qpn, psn, ack_req, pad_for(len), last && w.solicited);
    if (flags & kHasReth) {
        encode_reth(slot.hdr + h, {w.remote_addr, w.rkey, total});
        h += kRethLen;
    }
    if (flags & kHasImm) {
        put32(slot.hdr + h, w.imm);
        h += kImmLen;
    }
    const int n = w.local.gather(off, len, slot.pkt.pieces + 1);
    ctx.commit_tx(slot, qp, h, n, len);
}

void emit_read_request(SoftContext &ctx, SoftQp &qp, SendWqe &w, uint32_t k, uint32_t npkts) {
    auto &slot = ctx.begin_tx();
    const uint32_t off = k * qp.mtu;
    const uint32_t len = std::min<uint32_t>(npkts * qp.mtu, w.local.total - off);
    size_t h = put_bth(slot.hdr, kReadRequest, qp.dest_qpn, psn_add(w.first_psn, k), true, 0);
    encode_reth(slot.hdr + h, {w.remote_addr + off, w.rkey, len});
    h += kRethLen;
    ctx.commit_tx(slot, qp, h, 0, 0);
}

void emit_atomic(SoftContext &ctx, SoftQp &qp, SendWqe &w) {
    auto &slot = ctx.begin_tx();
    const uint8_t op = w.opcode == IBEX_WR_ATOMIC_CMP_AND_SWP ? kCompareSwap : kFetchAdd;
    size_t h = put_bth(slot.hdr, op, qp.dest_qpn, w.first_psn, true, 0);
    AtomicEth a;
    a.va = w.remote_addr;
    a.rkey = w.rkey;
    a.swap_add = op == kCompareSwap ? w.swap : w.compare_add;
    a.compare = op == kCompareSwap ? w.compare_add : 0;
    encode_atomic_eth(slot.hdr + h, a);
    h += kAtomicEthLen;
    ctx.commit_tx(slot, qp, h, 0, 0);
}

} // namespace

uint64_t transport_timeout_ns(uint8_t timeout) {
    if (timeout == 0) return 0;
    return uint64_t(4096) << std::min<uint8_t>(timeout, 31);
}

size_t put_bth(uint8_t *h, uint8_t opcode, uint32_t dest_qpn, uint32_t psn, bool ack_req, uint8_t pad,
               bool solicited) {
    Bth b;
    b.opcode = opcode;
    b.solicited = solicited;
    b.pad_count = pad;
    b.dest_qp = dest_qpn;
    b.ack_req = ack_req;
    b.psn = psn;
    encode_bth(h, b);
    return kBthLen;
}

void complete_send(SoftQp &qp, const SendWqe &w, ibex_wc_status_t status) {
    if (status == IBEX_WC_SUCCESS && !w.signaled && !qp.sig_all) return;
    ibex_wc_t wc{};
    wc.wr_id = w.wr_id;
    wc.status = status;
    wc.opcode = wc_opcode(w.opcode);
    wc.byte_len = w.local.total;
    wc.qp_num = qp.qp_num;
    wc.src_qp = qp.dest_qpn;
    qp.scq->push(wc);
}

// READ and atomic WQEs sent and not yet completed. The responder keeps the results of
// only the last kAtomicReplays atomics (to answer a retried one without executing it
// twice), so no more than that may be outstanding, as max_rd_atomic does on an RNIC.
uint32_t outstanding_rd_atomic(SoftQp &qp) {
    uint32_t n = 0;
    for (uint64_t pos = qp.sq.head(); pos < qp.tx_pos; ++pos) n += needs_response(qp.sq.at(pos));
    return n;
}

void requester_transmit(SoftContext &ctx, SoftQp &qp, uint64_t now, uint32_t &budget) {
    if (qp.state != IBEX_QPS_RTS || now < qp.rnr_until) return;
    // The QP's own window, and its share of the context's: many busy QPs together must not
    // put more in flight than the peer's socket can hold.
    uint32_t window = qp.window.update(now, {cc::EventType::kActiveFlows, 0, ctx.active_qps()}).window_packets;
    // Selective mode: no more in flight than the peer's out-of-order store holds.
    if (qp.inflight_cap) window = std::min(window, qp.inflight_cap);
    const uint32_t rd_atomic_limit = std::clamp<uint32_t>(qp.max_rd_atomic, 1, uint32_t(kAtomicReplays));
    qp.window_full = false;
    while (budget) {
        if (qp.resending) next_resend(qp);
        if (qp.tx_pos >= qp.sq.tail()) break;
        // DCQCN: requests leave no faster than the QP's rate.
        if (!rate_may_send(qp.rate.get(), now)) break;
        const uint64_t bytes_before = ctx.counters().tx_bytes;
        SendWqe &w = qp.sq.at(qp.tx_pos);
        const uint32_t psn = psn_add(w.first_psn, qp.tx_pkt);
        const uint32_t inflight = static_cast<uint32_t>(std::max(0, psn_diff(psn, qp.una)));
        if (qp.tx_pkt == 0 && needs_response(w) && outstanding_rd_atomic(qp) >= rd_atomic_limit) break;
        // IBEX_SEND_FENCE: wait until every earlier READ and atomic has completed.
        if (qp.tx_pkt == 0 && w.fence && outstanding_rd_atomic(qp) > 0) break;
        // GPU source: its copy to the staging shadow is still running (engine/staging.h).
        if (qp.tx_pkt == 0 && staging::active() && !staging::send_ready(ctx, qp, qp.tx_pos)) break;
        if (is_read(w)) {
            // Large READs go out as several requests of at most half a window each, so
            // the responses in flight stay bounded like any other traffic. A retry that
            // starts inside a segment ends where that segment ended: the responder's
            // expected PSN is the end of the request it executed, and a retried request
            // reaching past it would be a duplicate whose tail is never accepted.
            // Segments are cut from the configured window, not the current one, so that
            // a retry's segment boundaries never move.
            const uint32_t half = std::max<uint32_t>(1, ctx.config().max_inflight / 2);
            const uint32_t seg = std::min(w.npkts - qp.tx_pkt, half - qp.tx_pkt % half);
            if (inflight > 0 && inflight + seg > window) {
                qp.window_full = true;
                break;
            }
            if (psn_diff(psn, qp.sent_high) < 0) resent(ctx, qp);
            emit_read_request(ctx, qp, w, qp.tx_pkt, seg);
            qp.tx_pkt += seg;
        } else {
            if (inflight >= window) {
                qp.window_full = true;
                break;
            }
            if (psn_diff(psn, qp.sent_high) < 0) resent(ctx, qp);
            if (is_atomic(w))
                emit_atomic(ctx, qp, w);
            else
                emit_request(ctx, qp, w, qp.tx_pkt, inflight + 1 >= window);
            ++qp.tx_pkt;
        }
        --budget;
        rate_sent(qp.rate.get(), now, static_cast<uint32_t>(ctx.counters().tx_bytes - bytes_before));
        const uint32_t sent_end = psn_add(w.first_psn, qp.tx_pkt);
        if (psn_diff(sent_end, qp.sent_high) > 0) qp.sent_high = sent_end;
        if (qp.tx_pkt >= w.npkts) {
            ++qp.tx_pos;
            qp.tx_pkt = 0;
        }
        if (!qp.rto_deadline) rearm(qp, now);
    }
    if (qp.tail.rto_low()) qp.tail.update(now, packets_in_flight(qp), false, stalled(qp));
}

void requester_receive(SoftContext &ctx, SoftQp &qp, const PacketView &pv, uint64_t now) {
    if (qp.state != IBEX_QPS_RTS) return;
    switch (pv.bth.opcode) {
    case kAcknowledge: on_acknowledge(ctx, qp, pv, now); return;
    case kAtomicAcknowledge:
        if (pv.aeth.kind() != kAethAck) {
            on_acknowledge(ctx, qp, pv, now);
            return;
        }
        on_atomic_ack(ctx, qp, pv, now);
        return;
    case kReadResponseFirst:
    case kReadResponseLast:
    case kReadResponseOnly:
        if (pv.aeth.kind() != kAethAck) {
            on_acknowledge(ctx, qp, pv, now);
            return;
        }
        on_read_response(ctx, qp, pv, now);
        return;
    case kReadResponseMiddle: on_read_response(ctx, qp, pv, now); return;
    default: ++ctx.counters().rx_dropped_malformed; return;
    }
}

void requester_timers(SoftContext &ctx, SoftQp &qp, uint64_t now) {
    if (qp.state != IBEX_QPS_RTS) return;
    // RTO_low: at most kTailPackets unacknowledged and nothing heard for RTO_low. The tail
    // goes again; retry_cnt is left to the transport timeout, so a slow peer is not
    // declared dead after a few short timeouts.
    if (qp.tail.fire(now) && outstanding(qp) && now >= qp.rnr_until) {
        ++ctx.counters().tail_timeouts;
        ++qp.rtx.tail_timeouts;
        // A few in flight: all of them again. More: the last packet alone, a probe (it
        // carries AckReq): the responder acknowledges what it has, or names its holes
        // in a selective NAK, and only those go again.
        if (packets_in_flight(qp) <= TailTimer::kTailPackets)
            rewind(qp, true);
        else
            resend_range(qp, psn_add(qp.sent_high, kPsnMask), qp.sent_high);
    }
    if (!qp.rto_deadline || now < qp.rto_deadline) return;
    if (!outstanding(qp)) {
        qp.rto_deadline = 0;
        return;
    }
    ++ctx.counters().local_ack_timeout_err;
    ++qp.rtx.timeouts;
    if (qp.retry_left-- <= 0) {
        fail_head(qp, IBEX_WC_RETRY_EXC_ERR);
        return;
    }
    window_event(qp, now, cc::EventType::kTimeout);
    rewind(qp, true);
    qp.rto_deadline = now + transport_timeout_ns(qp.timeout);
}

uint64_t requester_deadline(const SoftQp &qp) {
    uint64_t d = qp.rto_deadline;
    if (qp.rnr_until && qp.tx_pos < qp.sq.tail() && (!d || qp.rnr_until < d)) d = qp.rnr_until;
    if (qp.tail.deadline() && (!d || qp.tail.deadline() < d)) d = qp.tail.deadline();
    return d;
}

} // namespace ibex::soft
