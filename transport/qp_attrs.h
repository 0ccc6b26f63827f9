// The verbs attributes a software QP (soft, shm) holds as ibex_modify_qp sets them and
// ibex_query_qp reports them. The path, the PSNs and the live retry budgets are each
// provider's own.
#pragma once

#include <cstdint>

#include <ibex/ibex.h>

#include "runtime/base/config.h"
#include "transport/qp_state.h"

namespace ibex {

// The path a context's new QPs start with until they are given their own
// (IBEX_QP_TRAFFIC_CLASS, IBEX_QP_SL): IBEX_TRAFFIC_CLASS and IBEX_SL, read when the context
// opens, as the verbs provider reads them; so the QPs a communicator connects can be put in
// a lossless class from the environment, on every provider.
struct PathDefaults {
    uint8_t traffic_class = 0;
    int8_t sl = -1; // -1: none (a port's own priority applies)

    static PathDefaults from_env() {
        PathDefaults d;
        d.traffic_class = static_cast<uint8_t>(config::get_int("IBEX_TRAFFIC_CLASS", 0, 0, 255));
        d.sl = static_cast<int8_t>(config::get_int("IBEX_SL", -1, 0, 7));
        return d;
    }
};

struct QpAttrs {
    ibex_qp_state_t state = IBEX_QPS_RESET;
    unsigned access = 0;
    uint8_t mtu_enum = IBEX_MTU_4096;
    uint8_t timeout = kQpDefaultTimeout;
    uint8_t retry_cnt = kQpDefaultRetryCnt;
    uint8_t rnr_retry = kQpDefaultRnrRetry;
    uint8_t min_rnr_timer = kQpDefaultMinRnrTimer;
    uint8_t max_rd_atomic = 16;
    uint8_t traffic_class = 0;
    int8_t sl = -1; // -1: never set (the port's priority applies)

    // The timer and retry limits and the path's class and service level named in `mask`.
    void apply_limits(const ibex_qp_attr_t &a, unsigned mask) {
        if (mask & IBEX_QP_TIMEOUT) timeout = a.timeout;
        if (mask & IBEX_QP_RETRY_CNT) retry_cnt = a.retry_cnt;
        if (mask & IBEX_QP_RNR_RETRY) rnr_retry = a.rnr_retry;
        if (mask & IBEX_QP_MIN_RNR_TIMER) min_rnr_timer = a.min_rnr_timer;
        if (mask & IBEX_QP_MAX_RD_ATOMIC) max_rd_atomic = a.max_rd_atomic;
        if (mask & IBEX_QP_TRAFFIC_CLASS) traffic_class = a.traffic_class;
        if (mask & IBEX_QP_SL) sl = static_cast<int8_t>(a.sl);
    }

    void take_path(const PathDefaults &d) {
        traffic_class = d.traffic_class;
        sl = d.sl;
    }

    // Everything but dest, rq_psn, sq_psn and qp_num.
    void report(ibex_qp_attr_t *a) const {
        a->qp_state = state;
        a->qp_access_flags = access;
        a->path_mtu = static_cast<ibex_mtu_t>(mtu_enum);
        a->timeout = timeout;
        a->retry_cnt = retry_cnt;
        a->rnr_retry = rnr_retry;
        a->min_rnr_timer = min_rnr_timer;
        a->max_rd_atomic = max_rd_atomic;
        a->traffic_class = traffic_class;
        a->sl = sl < 0 ? 0 : static_cast<uint8_t>(sl);
    }
};

} // namespace ibex
