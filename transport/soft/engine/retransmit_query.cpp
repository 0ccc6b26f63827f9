// ibex_query_qp_retransmit for the soft provider: a snapshot of one QP's loss-recovery
// counters, taken under the context lock.
#include <algorithm>
#include <cstring>
#include <mutex>

#include "transport/soft/engine/context.h"
#include "transport/soft/engine/qp_logic.h"

namespace ibex::soft {

ibex_status_t query_qp_retransmit(ibex_qp *q, ibex_qp_retransmit_t *out) {
    auto *qp = static_cast<SoftQp *>(q);
    ibex_qp_retransmit_t s{};
    {
        std::lock_guard l(qp->ctx->mutex());
        s.mode = qp->mode == RetransmitMode::kSelective ? IBEX_RETRANSMIT_SELECTIVE : IBEX_RETRANSMIT_GBN;
        s.timeouts = qp->rtx.timeouts;
        s.tail_timeouts = qp->rtx.tail_timeouts;
        s.naks_sent = qp->rtx.naks_sent;
        s.naks_received = qp->rtx.naks_received;
        s.packets_resent = qp->rtx.packets_resent;
        s.ooo_packets_held = qp->rtx.ooo_held;
        s.ooo_window = qp->ooo.slots();
        s.inflight_cap = qp->inflight_cap;
    }
    s.size = out->size;
    std::memcpy(out, &s, std::min<size_t>(out->size, sizeof s));
    return IBEX_OK;
}

} // namespace ibex::soft
