// The receive-posting loop of the software providers (soft, shm), run with the context
// lock held: RESET refuses, a bad SGE list refuses, ERR flushes the WR, a full queue
// refuses; otherwise fill(wr, wqe) resolves the WR's SGEs into the next receive WQE and the
// WR is queued. On a refusal *bad names the WR that was not posted, as ibv_post_recv does.
#pragma once

#include <ibex/ibex.h>

#include "runtime/base/status.h"

namespace ibex {

template <class Qp, class Flush, class Fill>
ibex_status_t post_recv_list(Qp &qp, ibex_recv_wr_t *wr, ibex_recv_wr_t **bad, int max_sge, Flush flush, Fill fill) {
    ibex_status_t st = IBEX_OK;
    for (; wr; wr = wr->next) {
        if (qp.state == IBEX_QPS_RESET) {
            st = fail(IBEX_ERR_INVALID_STATE, "QP 0x%x is in RESET; post_recv needs INIT or later", qp.qp_num);
            break;
        }
        if (wr->num_sge < 0 || wr->num_sge > max_sge || (wr->num_sge && !wr->sg_list)) {
            st = fail(IBEX_ERR_INVALID_ARGUMENT, "num_sge %d out of range (0..%d) or sg_list missing", wr->num_sge, max_sge);
            break;
        }
        if (qp.state == IBEX_QPS_ERR) {
            flush(*wr);
            continue;
        }
        if (qp.rq.full()) {
            st = fail(IBEX_ERR_QUEUE_FULL, "receive queue of QP 0x%x is full (%zu)", qp.qp_num, qp.rq.capacity());
            break;
        }
        auto &wqe = qp.rq.at(qp.rq.tail());
        if ((st = fill(*wr, wqe)) != IBEX_OK) break;
        wqe.wr_id = wr->wr_id;
        qp.rq.push();
    }
    if (bad) *bad = wr;
    return st;
}

} // namespace ibex
