// What ibex_qp_connect_attr lets a caller choose, checked apart from any QP: a communicator
// refuses a bad choice when it is created, before any rank has connected, and ranks compare
// theirs in the same words the log prints.
#pragma once

#include <ibex/ibex.h>

#include <cstddef>

namespace ibex {

// The attributes a caller may choose; the state, the peer and the PSNs come from the
// addresses.
inline constexpr unsigned kQpConnectChoosable = IBEX_QP_ACCESS_FLAGS | IBEX_QP_PATH_MTU | IBEX_QP_TIMEOUT |
                                                IBEX_QP_RETRY_CNT | IBEX_QP_RNR_RETRY | IBEX_QP_MIN_RNR_TIMER |
                                                IBEX_QP_MAX_RD_ATOMIC | IBEX_QP_TRAFFIC_CLASS | IBEX_QP_SL;

// ibex_qp_connect_attr's attr and attr_mask, kept: the values of the attributes in mask.
struct QpChoice {
    ibex_qp_attr_t attr = IBEX_QP_ATTR_INIT;
    unsigned mask = 0;
};

// Checks a choice: mask names only choosable attributes, attr is given when mask is not 0
// and has a known size and magic, and each chosen value is in range. Copies attr (of any
// older, smaller layout) into *out. `who` begins the error detail ("ibex_qp_connect_attr",
// "ibex_comm_config_t.qp_attr").
ibex_status_t qp_connect_choice(const ibex_qp_attr_t *attr, unsigned mask, const char *who, QpChoice *out);

// The chosen values as "traffic class 104, sl 3, timeout 18" ("defaults" for none), cut at
// whole items to fit buf.
const char *qp_choice_text(const QpChoice &choice, char *buf, size_t len);

} // namespace ibex
