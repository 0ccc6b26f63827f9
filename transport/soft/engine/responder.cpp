// Responder side of a soft RC QP: executes requests strictly in PSN order, places SEND
// and WRITE payloads, executes READs and atomics, and answers duplicates (re-ACK, READ
// replay, atomic replay from a small ring). A request past a hole is dropped with one
// NAK (go-back-N) or, in selective mode, held in the QP's out-of-order store, named in
// a selective NAK, and executed once the hole fills. Every remote access is checked against the
// memory region's key, bounds and rights before a byte is touched.
#include <algorithm>

#include "transport/soft/codec/roce.h"
#include "transport/soft/engine/qp_logic.h"

namespace ibex::soft {

using namespace ibex::roce;

namespace {

constexpr uint32_t kAckDeferLimit = 32;
constexpr uint32_t kAckRideMin = 4;
constexpr uint32_t kLazyAckRideMin = 16;

ResponseJob *push_job(SoftQp &qp) {
    if (qp.job_count == kResponseJobs) return nullptr;
    ResponseJob &j = qp.jobs[(qp.job_head + qp.job_count) % kResponseJobs];
    ++qp.job_count;
    j = ResponseJob{};
    return &j;
}

ResponseJob *queue_nak(SoftContext &ctx, SoftQp &qp, uint8_t syndrome, uint32_t psn) {
    ResponseJob *j = push_job(qp);
    if (!j) return nullptr;
    j->kind = ResponseJob::Kind::kNak;
    j->psn = psn;
    j->syndrome = syndrome;
    j->npkts = 1;
    if ((syndrome & 0x60) == kAethRnrNak) ++ctx.counters().rnr_nak_sent;
    if (syndrome == (uint8_t(kAethNak) | uint8_t(kNakPsnSeqError))) {
        ++ctx.counters().seq_naks_sent;
        ++qp.rtx.naks_sent;
    }
    return j;
}

// A request the responder cannot execute: NAK it and move to the error state, as an
// RNIC does for access and invalid-request errors.
void fatal_nak(SoftContext &ctx, SoftQp &qp, uint8_t code, uint32_t psn) {
    if (code == kNakRemoteAccess) ++ctx.counters().remote_access_errors;
    queue_nak(ctx, qp, uint8_t(kAethNak | code), psn);
    qp.in_msg = SoftQp::InMsg::kNone;
    qp_to_error(qp);
}

// `flags`: the packet's (kFirst, kLast). Only the ACK of one-packet messages may be
// delayed: the end of a longer message is what its requester's next step usually waits
// for (a collective's phase, a window), and one ACK per such message costs little.
void accepted(SoftContext &ctx, SoftQp &qp, uint32_t psn, bool ack_req, uint16_t flags) {
    qp.epsn = psn_add(psn, 1);
    qp.nak_sent = false;
    ++qp.unacked_rx;
    if (ack_req) {
        const bool one_packet = (flags & kFirst) && (flags & kLast);
        if (!one_packet) {
            qp.ack_due = 0;
        } else if (!qp.ack_pending || qp.ack_lazy) {
            const uint64_t due = ctx.config().ack_delay_us ? ctx.now_ns() + ctx.config().ack_delay_us * 1000ull : 0;
            qp.ack_due = qp.ack_pending ? std::min(qp.ack_due, due) : due;
        }
        qp.ack_pass = ctx.pass();
        qp.ack_pending = true;
        qp.ack_lazy = false;
        qp.ack_psn = psn;
    } else if (!qp.ack_pending) {
        qp.ack_due = ctx.config().ack_lazy_us ? ctx.now_ns() + ctx.config().ack_lazy_us * 1000ull : 0;
        qp.ack_pending = qp.ack_lazy = true;
        qp.ack_psn = psn;
        qp.ack_pass = ctx.pass();
    } else {
        qp.ack_psn = psn; // the pending ACK covers this packet too
    }
}

// Called when the expected PSN itself arrives and finds no receive: every such arrival
// (the first try and each RNR retry) is answered, or the requester would hear nothing
// after its first retry and fail with RETRY_EXC_ERR instead of retrying on the RNR timer.
void rnr_nak(SoftContext &ctx, SoftQp &qp, uint32_t psn) {
    queue_nak(ctx, qp, uint8_t(kAethRnrNak | (qp.min_rnr_timer & 0x1f)), psn);
    qp.nak_sent = true; // until this PSN arrives again, later packets are dropped silently
}

void complete_recv(SoftQp &qp, ibex_wc_status_t status, ibex_wc_opcode_t op, uint32_t len, const PacketView *pv) {
    RecvWqe &r = qp.rq.front();
    ibex_wc_t wc{};
    wc.wr_id = r.wr_id;
    wc.status = status;
    wc.opcode = op;
    wc.byte_len = len;
    wc.qp_num = qp.qp_num;
    wc.src_qp = qp.dest_qpn;
    if (pv && (pv->flags & kHasImm)) {
        wc.imm_data = pv->imm;
        wc.wc_flags = IBEX_WC_WITH_IMM;
    }
    qp.rq.pop();
    qp.rcq->push(wc);
}

bool middle_length_ok(const SoftQp &qp, const PacketView &pv) {
    const bool last = pv.flags & kLast;
    return last ? pv.payload_len <= qp.mtu : pv.payload_len == qp.mtu;
}

void on_send(SoftContext &ctx, SoftQp &qp, const PacketView &pv) {
    const uint32_t psn = pv.bth.psn;
    if (pv.flags & kFirst) {
        if (qp.in_msg != SoftQp::InMsg::kNone) return fatal_nak(ctx, qp, kNakInvalidRequest, psn);
        if (qp.rq.empty()) return rnr_nak(ctx, qp, psn);
        qp.in_msg = SoftQp::InMsg::kSend;
        qp.in_offset = 0;
    } else if (qp.in_msg != SoftQp::InMsg::kSend) {
        return fatal_nak(ctx, qp, kNakInvalidRequest, psn);
    }
    if (!middle_length_ok(qp, pv)) return fatal_nak(ctx, qp, kNakInvalidRequest, psn);
    RecvWqe &r = qp.rq.front();
    if (uint64_t(qp.in_offset) + pv.payload_len > r.local.total) {
        complete_recv(qp, IBEX_WC_LOC_LEN_ERR, IBEX_WC_RECV, qp.in_offset, nullptr);
        return fatal_nak(ctx, qp, kNakInvalidRequest, psn);
    }
    r.local.scatter(qp.in_offset, pv.payload, pv.payload_len);
    qp.in_offset += pv.payload_len;
    if (pv.flags & kLast) {
        complete_recv(qp, IBEX_WC_SUCCESS, IBEX_WC_RECV, qp.in_offset, &pv);
        qp.in_msg = SoftQp::InMsg::kNone;
        ++qp.msn;
    }
    accepted(ctx, qp, psn, pv.bth.ack_req, pv.flags);
}

// placed: the payload is in place already (responder_placement()).
void on_write(SoftContext &ctx, SoftQp &qp, const PacketView &pv, bool placed) {
    const uint32_t psn = pv.bth.psn;
    if (pv.flags & kFirst) {
        if (qp.in_msg != SoftQp::InMsg::kNone) return fatal_nak(ctx, qp, kNakInvalidRequest, psn);
        if (!(qp.access & IBEX_ACCESS_REMOTE_WRITE)) return fatal_nak(ctx, qp, kNakRemoteAccess, psn);
        uint8_t *dst = nullptr;
        if (pv.reth.dma_len) {
            dst = ctx.mrs().resolve(pv.reth.rkey, pv.reth.va, pv.reth.dma_len, IBEX_ACCESS_REMOTE_WRITE);
            if (!dst) return fatal_nak(ctx, qp, kNakRemoteAccess, psn);
        }
        qp.in_msg = SoftQp::InMsg::kWrite;
        qp.in_write = dst;
        qp.in_write_len = pv.reth.dma_len;
        qp.in_write_rkey = pv.reth.rkey;
        qp.in_write_va = pv.reth.va;
        qp.in_write_epoch = ctx.mrs().epoch();
        qp.in_offset = 0;
    } else if (qp.in_msg != SoftQp::InMsg::kWrite) {
        return fatal_nak(ctx, qp, kNakInvalidRequest, psn);
    } else if (qp.in_write_len && qp.in_write_epoch != ctx.mrs().epoch()) {
        // A region was deregistered since the FIRST packet: the target may be gone (and
        // its memory freed), so the key is checked again before another byte lands.
        qp.in_write = ctx.mrs().resolve(qp.in_write_rkey, qp.in_write_va, qp.in_write_len, IBEX_ACCESS_REMOTE_WRITE);
        if (!qp.in_write) return fatal_nak(ctx, qp, kNakRemoteAccess, psn);
        qp.in_write_epoch = ctx.mrs().epoch();
    }
    const bool last = pv.flags & kLast;
    const uint64_t end = uint64_t(qp.in_offset) + pv.payload_len;
    if (!middle_length_ok(qp, pv) || end > qp.in_write_len || (last && end != qp.in_write_len))
        return fatal_nak(ctx, qp, kNakInvalidRequest, psn);
    if (last && (pv.flags & kHasImm) && qp.rq.empty()) {
        if (pv.flags & kFirst) qp.in_msg = SoftQp::InMsg::kNone; // the retry starts the message again
        return rnr_nak(ctx, qp, psn);
    }
    if (pv.payload_len && !placed) std::memcpy(qp.in_write + qp.in_offset, pv.payload, pv.payload_len);
    qp.in_offset = static_cast<uint32_t>(end);
    if (last) {
        if (pv.flags & kHasImm) complete_recv(qp, IBEX_WC_SUCCESS, IBEX_WC_RECV_RDMA_WITH_IMM, qp.in_write_len, &pv);
        qp.in_msg = SoftQp::InMsg::kNone;
        ++qp.msn;
    }
    accepted(ctx, qp, psn, pv.bth.ack_req, pv.flags);
}

// Checks a READ request and queues its responses. Returns false if it was refused.
bool queue_read(SoftContext &ctx, SoftQp &qp, const PacketView &pv, bool duplicate) {
    const uint32_t psn = pv.bth.psn;
    const uint32_t len = pv.reth.dma_len;
    const uint8_t *src = nullptr;
    if (!(qp.access & IBEX_ACCESS_REMOTE_READ)) {
        if (!duplicate) fatal_nak(ctx, qp, kNakRemoteAccess, psn);
        return false;
    }
    if (len) {
        src = ctx.mrs().resolve(pv.reth.rkey, pv.reth.va, len, IBEX_ACCESS_REMOTE_READ);
        if (!src) {
            if (!duplicate) fatal_nak(ctx, qp, kNakRemoteAccess, psn);
            return false;
        }
    }
    ResponseJob *j = push_job(qp);
    if (!j) return false; // the requester's timer will ask again
    j->kind = ResponseJob::Kind::kRead;
    j->psn = psn;
    j->src = src;
    j->len = len;
    j->rkey = pv.reth.rkey;
    j->va = pv.reth.va;
    j->epoch = ctx.mrs().epoch();
    j->npkts = std::max<uint32_t>(1, (len + qp.mtu - 1) / qp.mtu);
    return true;
}

void on_read(SoftContext &ctx, SoftQp &qp, const PacketView &pv) {
    if (qp.in_msg != SoftQp::InMsg::kNone) return fatal_nak(ctx, qp, kNakInvalidRequest, pv.bth.psn);
    if (!queue_read(ctx, qp, pv, false)) return;
    const ResponseJob &j = qp.jobs[(qp.job_head + qp.job_count - 1) % kResponseJobs];
    qp.epsn = psn_add(pv.bth.psn, j.npkts);
    qp.nak_sent = false;
    ++qp.msn;
}

void on_atomic(SoftContext &ctx, SoftQp &qp, const PacketView &pv) {
    const uint32_t psn = pv.bth.psn;
    if (qp.in_msg != SoftQp::InMsg::kNone) return fatal_nak(ctx, qp, kNakInvalidRequest, psn);
    if (!(qp.access & IBEX_ACCESS_REMOTE_ATOMIC)) return fatal_nak(ctx, qp, kNakRemoteAccess, psn);
    if (pv.atomic.va & 7) return fatal_nak(ctx, qp, kNakInvalidRequest, psn);
    uint8_t *p = ctx.mrs().resolve(pv.atomic.rkey, pv.atomic.va, 8, IBEX_ACCESS_REMOTE_ATOMIC);
    if (!p) return fatal_nak(ctx, qp, kNakRemoteAccess, psn);
    if (qp.job_count == kResponseJobs) return; // retried by the requester's timer
    auto *target = reinterpret_cast<uint64_t *>(p);
    uint64_t orig;
    if (pv.bth.opcode == kCompareSwap) {
        orig = pv.atomic.compare;
        __atomic_compare_exchange_n(target, &orig, pv.atomic.swap_add, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
    } else {
        orig = __atomic_fetch_add(target, pv.atomic.swap_add, __ATOMIC_SEQ_CST);
    }
    AtomicReplay &r = qp.replays[qp.replay_next];
    qp.replay_next = (qp.replay_next + 1) % kAtomicReplays;
    r = {psn, orig, true};
    ResponseJob *j = push_job(qp);
    j->kind = ResponseJob::Kind::kAtomicAck;
    j->psn = psn;
    j->orig = orig;
    j->npkts = 1;
    qp.epsn = psn_add(psn, 1);
    qp.nak_sent = false;
    ++qp.msn;
}

void on_duplicate(SoftContext &ctx, SoftQp &qp, const PacketView &pv) {
    ++ctx.counters().duplicate_request;
    if (pv.flags & kIsRead) {
        // Replayed from memory, as rxe does: a READ has no side effects.
        queue_read(ctx, qp, pv, true);
        return;
    }
    if (pv.flags & kIsAtomic) {
        // Never executed twice: the saved original value is sent again.
        for (const AtomicReplay &r : qp.replays) {
            if (r.valid && r.psn == pv.bth.psn) {
                if (ResponseJob *j = push_job(qp)) {
                    j->kind = ResponseJob::Kind::kAtomicAck;
                    j->psn = r.psn;
                    j->orig = r.orig;
                    j->npkts = 1;
                }
                return;
            }
        }
        return;
    }
    qp.ack_pending = true;
    qp.ack_lazy = false;
    qp.ack_due = 0; // the requester is retrying: answer at once
    qp.ack_psn = psn_add(qp.epsn, kPsnMask);
}

// `sack_end`: a selective NAK (see congestion/README.md): the BTH's reserved bits carry
// kBthSelectiveNak and the AETH's MSN field the PSN that ends the hole.
void emit_ack(SoftContext &ctx, SoftQp &qp, uint8_t opcode, uint32_t psn, uint8_t syndrome, const uint64_t *orig,
              const uint32_t *sack_end = nullptr) {
    auto &slot = ctx.begin_tx();
    size_t h = put_bth(slot.hdr, opcode, qp.dest_qpn, psn, false, 0);
    if (sack_end) slot.hdr[8] |= kBthSelectiveNak;
    encode_aeth(slot.hdr + h, {syndrome, sack_end ? *sack_end : qp.msn});
    h += kAethLen;
    if (orig) {
        put64(slot.hdr + h, *orig);
        h += kAtomicAckEthLen;
    }
    ctx.commit_tx(slot, qp, h, 0, 0);
}

void emit_read_response(SoftContext &ctx, SoftQp &qp, ResponseJob &j) {
    auto &slot = ctx.begin_tx();
    const uint32_t k = j.next;
    const uint32_t off = k * qp.mtu;
    const uint32_t len = std::min<uint32_t>(qp.mtu, j.len - off);
    uint8_t op;
    if (j.npkts == 1)
        op = kReadResponseOnly;
    else if (k == 0)
        op = kReadResponseFirst;
    else if (k + 1 == j.npkts)
        op = kReadResponseLast;
    else
        op = kReadResponseMiddle;
    size_t h = put_bth(slot.hdr, op, qp.dest_qpn, psn_add(j.psn, k), false, pad_for(len));
    if (op_info(op).flags & kHasAeth) {
        encode_aeth(slot.hdr + h, {uint8_t(kAethAck | kAethCreditsUnlimited), qp.msn});
        h += kAethLen;
    }
    int n = 0;
    if (len) {
        slot.pkt.pieces[1] = {const_cast<uint8_t *>(j.src + off), len};
        n = 1;
    }
    ctx.commit_tx(slot, qp, h, n, len);
}

} // namespace

namespace {

void execute(SoftContext &ctx, SoftQp &qp, const PacketView &pv, bool placed = false) {
    if (pv.flags & kIsSend) return on_send(ctx, qp, pv);
    if (pv.flags & kIsWrite) return on_write(ctx, qp, pv, placed);
    if (pv.flags & kIsRead) return on_read(ctx, qp, pv);
    if (pv.flags & kIsAtomic) return on_atomic(ctx, qp, pv);
}

// Names the hole that starts at the expected PSN in a selective NAK: once when the hole
// opens or changes, and again every ooo.slots() / 4 packets held while it stays open
// (the requester's resend was lost; IRN recovers that by timeout alone), or whenever the
// packet asks for an acknowledgement (`asked`): the requester's tail probe is a copy of a
// packet already held, which holds nothing new, and left unanswered it backed the tail
// timer off until the transport timeout fired (tens per run at 3 % loss).
void selective_nak(SoftContext &ctx, SoftQp &qp, bool asked = false) {
    uint32_t end;
    if (!qp.ooo.first_after(qp.epsn, end)) return;
    const bool same = qp.sack_named && qp.sack_epsn == qp.epsn && qp.sack_end == end;
    if (same && !asked && qp.sack_since < qp.ooo.slots() / 4) return;
    ResponseJob *j = queue_nak(ctx, qp, uint8_t(kAethNak) | uint8_t(kNakPsnSeqError), qp.epsn);
    if (!j) return; // the job ring is full: the next held packet tries again
    j->selective = true;
    j->sack_end = end;
    qp.sack_named = true;
    qp.sack_epsn = qp.epsn;
    qp.sack_end = end;
    qp.sack_since = 0;
}

void out_of_order(SoftContext &ctx, SoftQp &qp, const uint8_t *data, uint32_t len, int32_t d, bool ack_req) {
    ++ctx.counters().out_of_sequence;
    // nak_sent: an RNR NAK (or a go-back-N NAK) for the expected PSN is outstanding and
    // the requester goes back to it anyway; later packets are still worth holding.
    if (qp.ooo.slots() && static_cast<uint32_t>(d) < qp.ooo.slots()) {
        if (qp.ooo.hold(qp.epsn, static_cast<uint32_t>(d), data, len)) {
            ++ctx.counters().ooo_packets_held;
            ++qp.rtx.ooo_held;
            ++qp.sack_since;
        }
        if (!qp.nak_sent) selective_nak(ctx, qp, ack_req);
        return;
    }
    // Go-back-N, or past the store: everything from the expected PSN is sent again.
    if (!qp.nak_sent) {
        queue_nak(ctx, qp, uint8_t(kAethNak) | uint8_t(kNakPsnSeqError), qp.epsn);
        qp.nak_sent = true;
    }
}

// Executes held packets from the expected PSN on, in order, until the next hole (or a
// packet that is not accepted: RNR, a fatal NAK), then names that hole.
void drain_held(SoftContext &ctx, SoftQp &qp) {
    while (qp.state == IBEX_QPS_RTR || qp.state == IBEX_QPS_RTS) {
        uint32_t len = 0;
        const uint32_t psn = qp.epsn;
        const uint8_t *p = qp.ooo.find(psn, len);
        if (!p) break;
        PacketView v;
        const bool ok = parse_packet(p, len, &v) == ParseError::kOk; // parsed once already
        if (ok) execute(ctx, qp, v);
        qp.ooo.release(psn);
        if (!ok || qp.epsn == psn) break;
    }
    qp.ooo.drop_before(qp.epsn); // a READ's PSN range covers them: never sent as requests
    if (qp.ooo.empty()) {
        qp.sack_named = false;
        return;
    }
    if (!qp.nak_sent) selective_nak(ctx, qp);
}

} // namespace

uint8_t *responder_placement(SoftContext &ctx, const SoftQp &qp, const PacketView &pv) {
    // Only a WRITE MIDDLE or LAST at the expected PSN that on_write places with a plain
    // copy: its place comes from the QP (the FIRST packet's RETH, checked on arrival), not
    // from this packet's own unverified header, and the checks here are on_write's. A
    // packet that then fails its ICRC has written only bytes of the message that are not
    // accepted yet, which the requester sends again; a FIRST, whose RETH could be the
    // corrupted part, is checked before a byte lands.
    if (qp.state != IBEX_QPS_RTR && qp.state != IBEX_QPS_RTS) return nullptr;
    if (!(pv.flags & kIsWrite) || (pv.flags & kFirst) || !pv.payload_len || pv.bth.psn != qp.epsn) return nullptr;
    if (qp.in_msg != SoftQp::InMsg::kWrite || !qp.in_write || qp.in_write_epoch != ctx.mrs().epoch()) return nullptr;
    const bool last = pv.flags & kLast;
    const uint64_t end = uint64_t(qp.in_offset) + pv.payload_len;
    if (!middle_length_ok(qp, pv) || end > qp.in_write_len || (last && end != qp.in_write_len)) return nullptr;
    if (last && (pv.flags & kHasImm) && qp.rq.empty()) return nullptr; // RNR: nothing lands
    return qp.in_write + qp.in_offset;
}

void responder_receive(SoftContext &ctx, SoftQp &qp, const PacketView &pv, const uint8_t *data, uint32_t len, bool placed) {
    if (qp.state != IBEX_QPS_RTR && qp.state != IBEX_QPS_RTS) return;
    const int32_t d = psn_diff(pv.bth.psn, qp.epsn);
    if (d > 0) return out_of_order(ctx, qp, data, len, d, pv.bth.ack_req);
    if (d < 0) return on_duplicate(ctx, qp, pv);
    execute(ctx, qp, pv, placed);
    if (!qp.ooo.empty()) drain_held(ctx, qp);
}

void responder_transmit(SoftContext &ctx, SoftQp &qp, uint32_t &budget, uint64_t now, bool request_left) {
    while (budget && qp.job_count) {
        ResponseJob &j = qp.jobs[qp.job_head];
        if (j.kind == ResponseJob::Kind::kRead && j.len && j.epoch != ctx.mrs().epoch()) {
            // A region was deregistered since the READ was accepted: its source may be
            // freed memory. Check the key again; if it is gone, the rest of the READ
            // becomes a remote access NAK for the next response PSN (the requester fails
            // the READ with REM_ACCESS_ERR), as an RNIC does for an invalidated key.
            j.src = ctx.mrs().resolve(j.rkey, j.va, j.len, IBEX_ACCESS_REMOTE_READ);
            j.epoch = ctx.mrs().epoch();
            if (!j.src) {
                ++ctx.counters().remote_access_errors;
                j.kind = ResponseJob::Kind::kNak;
                j.psn = psn_add(j.psn, j.next);
                j.syndrome = uint8_t(kAethNak) | uint8_t(kNakRemoteAccess);
                j.npkts = j.next + 1;
                qp.in_msg = SoftQp::InMsg::kNone;
                qp_to_error(qp);
            }
        }
        switch (j.kind) {
        case ResponseJob::Kind::kRead: emit_read_response(ctx, qp, j); break;
        case ResponseJob::Kind::kAtomicAck:
            emit_ack(ctx, qp, kAtomicAcknowledge, j.psn, kAethAck | kAethCreditsUnlimited, &j.orig);
            break;
        case ResponseJob::Kind::kNak:
            emit_ack(ctx, qp, kAcknowledge, j.psn, j.syndrome, nullptr, j.selective ? &j.sack_end : nullptr);
            break;
        }
        --budget;
        if (++j.next >= j.npkts) {
            qp.job_head = (qp.job_head + 1) % kResponseJobs;
            --qp.job_count;
        }
    }
    // A plain ACK of one-packet messages covering fewer than kAckRideMin packets is delayed
    // (EngineConfig::ack_delay_us, ack_due) so that one acknowledges several small
    // messages: in software every ACK is a packet built, sent and received on the CPUs the
    // application runs on. It leaves when due, or with a request of this QP (request_left)
    // once it has waited half its delay or covers kAckRideMin packets: two ranks exchanging
    // small messages then send one ACK per few messages, in the batch of a message already
    // going. Any other ACK (a window's worth, the end of a longer message: its sender may
    // be waiting for it) leaves at the next pass, or at once with a request. Any ACK made
    // pending by this very pass waits for the next pass (the application sees its data
    // before ibex spends a send on the ACK), unless kAckDeferLimit packets wait for it.
    const uint64_t delay = uint64_t(qp.ack_lazy ? ctx.config().ack_lazy_us : ctx.config().ack_delay_us) * 1000;
    // (A lazy ACK waits for as many packets as a long message has between AckReqs: the
    // middle packets of a bulk transfer make one too, which then rides no more often.)
    const uint32_t ride_min = qp.ack_lazy ? std::max(kLazyAckRideMin, ctx.config().ack_req_every) : kAckRideMin;
    const bool few = qp.unacked_rx < ride_min;
    const bool rides = request_left && (!few || now + delay / 2 >= qp.ack_due);
    // A lazy ACK (ack_lazy: no packet it covers asked for one) leaves only when due or
    // riding: what the requester does wait for (a signaled WR, a full window or send
    // queue, a periodic AckReq of a long message) asks, and makes the ACK a plain one.
    const bool deferred =
        !rides && (qp.ack_lazy ? now < qp.ack_due
                               : qp.unacked_rx < kAckDeferLimit && ((ctx.deferring_acks() && qp.ack_pass == ctx.pass()) ||
                                                                    (few && now < qp.ack_due)));
    if (qp.ack_pending && qp.job_count == 0 && budget && !deferred) {
        emit_ack(ctx, qp, kAcknowledge, qp.ack_psn, kAethAck | kAethCreditsUnlimited, nullptr);
        qp.ack_pending = qp.ack_lazy = false;
        qp.unacked_rx = 0;
        --budget;
    }
}

void qp_to_error(SoftQp &qp) {
    if (qp.state == IBEX_QPS_ERR) return;
    qp.state = IBEX_QPS_ERR;
    while (!qp.sq.empty()) {
        const SendWqe &w = qp.sq.front();
        ibex_wc_t wc{};
        wc.wr_id = w.wr_id;
        wc.status = IBEX_WC_WR_FLUSH_ERR;
        wc.qp_num = qp.qp_num;
        wc.src_qp = qp.dest_qpn;
        qp.scq->push(wc);
        qp.sq.pop();
    }
    while (!qp.rq.empty()) complete_recv(qp, IBEX_WC_WR_FLUSH_ERR, IBEX_WC_RECV, 0, nullptr);
    qp.tx_pos = qp.sq.tail();
    qp.tx_pkt = 0;
    qp.rto_deadline = 0;
    qp.in_msg = SoftQp::InMsg::kNone;
}

} // namespace ibex::soft
