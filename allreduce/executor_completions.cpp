// What the executor's completions mean: data that landed (matched to its step in arrival
// order, or held when the peer is a collective ahead), sends done, and the control
// messages (credits, eager rings, landing zones, ready buffers, eager slots handed back)
// that come in as receives. Acting on them is executor.cpp's.
#include <cstring>

#include "allreduce/executor.h"
#include "allreduce/executor_queues.h"
#include "runtime/base/status.h"

namespace ibex::coll {

ibex_status_t Executor::arrived(Channel &c, const ibex_wc_t &wc) {
    const uint32_t seq = wc.imm_data & kImmSeqMask;
    const uint32_t expect = (c.arrive_seq + static_cast<uint32_t>(c.early.size())) & kImmSeqMask;
    if (seq != expect) return fail(IBEX_ERR_INTERNAL, "rank %d: data sequence %u, expected %u", c.rank, seq, expect);
    const bool eager = (wc.imm_data & kImmEager) != 0;
    if (!c.early.empty() || !active_ || c.next_arrival >= c.recvs.size()) {
        // Only an eager slice, or a direct one into the landing zone, can come before its
        // collective starts here (the peer is one collective ahead); it waits where it is.
        if (!eager && !c.zone) return fail(IBEX_ERR_INTERNAL, "rank %d wrote data this rank never asked for", c.rank);
        c.early.push_back(wc.byte_len | (eager ? 0 : Channel::kEarlyDirect));
        return IBEX_OK;
    }
    return match_arrival(c, eager, wc.byte_len);
}

ibex_status_t Executor::match_arrival(Channel &c, bool eager, uint32_t byte_len) {
    const int i = c.recvs[c.next_arrival];
    const Step &st = sched_.steps[static_cast<size_t>(i)];
    if (eager != (!sched_.direct && is_eager(st.bytes)) || ((eager || sched_.direct) && byte_len != st.bytes))
        return fail(IBEX_ERR_INVALID_ARGUMENT,
                    "rank %d sent %u bytes where this rank expects %zu: the ranks called different collectives, "
                    "counts or types, or a send and its receive differ in length (or set IBEX_COMM_EAGER "
                    "differently)",
                    c.rank, byte_len, st.bytes);
    if (eager)
        c.eager_slot_of[c.next_arrival] =
            static_cast<int>(c.eager_arrived++ % static_cast<uint32_t>(params_.eager_slots));
    else if (st.kind == StepKind::recv_copy) mark_done(i);
    ++c.arrive_seq;
    ++c.next_arrival;
    return IBEX_OK;
}

ibex_status_t Executor::handle(const ibex_wc_t &wc, bool *did) {
    const size_t ci = wr_chan(wc.wr_id);
    if (ci >= chans_.size()) return fail(IBEX_ERR_INTERNAL, "completion for an unknown channel");
    Channel &c = chans_[ci];
    if (wc.status != IBEX_WC_SUCCESS)
        return fail(IBEX_ERR_REMOTE, "connection to rank %d failed: %s", c.rank,
                    ibex_wc_status_str(wc.status));
    *did = true;
    switch (wr_kind(wc.wr_id)) {
    case kData:
        ++c.data_done;
        mark_done(static_cast<int>(wr_value(wc.wr_id)));
        return IBEX_OK;
    case kEagerData:
        c.eager_tx_done = wr_value(wc.wr_id) + 1; // its copy and those before it may be reused
        return IBEX_OK;
    case kCredit:
    case kFastbox:
        return IBEX_OK;
    case kRecv: {
        const uint32_t idx = wr_value(wc.wr_id);
        if (wc.opcode == IBEX_WC_RECV_RDMA_WITH_IMM) {
            IBEX_TRY(arrived(c, wc));
        } else {
            if (wc.byte_len != sizeof(Credit))
                return fail(IBEX_ERR_INTERNAL, "rank %d sent a %u-byte control message", c.rank, wc.byte_len);
            Credit cr;
            std::memcpy(&cr, c.rx.data() + idx * kRxBytes, sizeof cr);
            switch (cr.kind) {
            case Ctl::credit: c.credits.push_back(cr); break;
            case Ctl::eager_ring:
                if (cr.len != params_.eager_bytes)
                    return fail(IBEX_ERR_INVALID_ARGUMENT,
                                "rank %d sends slices of up to %u bytes eagerly, this rank %zu: set IBEX_COMM_EAGER "
                                "alike on every rank",
                                c.rank, cr.len, params_.eager_bytes);
                if (c.peer_eager_known || (cr.len && !cr.seq))
                    return fail(IBEX_ERR_INTERNAL, "rank %d announced a bad eager ring", c.rank);
                c.peer_eager_known = true;
                c.peer_eager_addr = cr.addr;
                c.peer_eager_rkey = cr.rkey;
                c.peer_eager_slot_bytes = cr.len;
                c.peer_eager_slots = cr.seq;
                break;
            case Ctl::zone:
                if (c.peer_zone_known) return fail(IBEX_ERR_INTERNAL, "rank %d announced a second landing zone", c.rank);
                c.peer_zone_known = true;
                c.peer_zone_addr = cr.addr;
                c.peer_zone_rkey = cr.rkey;
                c.peer_zone_bytes = cr.len;
                break;
            case Ctl::ready: c.peer_recvbuf = cr; break;
            case Ctl::eager_return:
                if (cr.seq - c.eager_freed > c.eager_sent - c.eager_freed)
                    return fail(IBEX_ERR_INTERNAL, "rank %d handed back eager slots it never had", c.rank);
                c.eager_freed = cr.seq;
                break;
            default: return fail(IBEX_ERR_INTERNAL, "rank %d sent an unknown control message", c.rank);
            }
        }
        return post_recv(c, idx);
    }
    }
    return fail(IBEX_ERR_INTERNAL, "completion with an unknown work request id");
}

} // namespace ibex::coll
