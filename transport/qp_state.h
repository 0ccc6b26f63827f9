// The RC QP state machine as every provider enforces it: the transitions ibex_modify_qp
// accepts (the subset of the verbs table ibex uses) and the states' names for details.
#pragma once

#include <ibex/ibex.h>

namespace ibex {

inline const char *qp_state_name(ibex_qp_state_t s) {
    static const char *names[] = {"RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR"};
    return (s >= 0 && s <= IBEX_QPS_ERR) ? names[s] : "?";
}

inline bool qp_transition_ok(ibex_qp_state_t from, ibex_qp_state_t to) {
    if (to == IBEX_QPS_RESET || to == IBEX_QPS_ERR) return true;
    switch (from) {
    case IBEX_QPS_RESET: return to == IBEX_QPS_INIT;
    case IBEX_QPS_INIT: return to == IBEX_QPS_INIT || to == IBEX_QPS_RTR;
    case IBEX_QPS_RTR: return to == IBEX_QPS_RTS;
    case IBEX_QPS_RTS: return to == IBEX_QPS_RTS;
    default: return false;
    }
}

} // namespace ibex
