// The RC QP state machine as every provider enforces it: the transitions ibex_modify_qp
// accepts and the attributes each takes (the subset of the verbs table ibex uses), and
// the states' names for details.
#pragma once

#include <ibex/ibex.h>

#include <cstdio>
#include <new>
#include <type_traits>
#include <utility>

#include "runtime/base/status.h"

namespace ibex {

// ibex's defaults for what a caller leaves unset (ibex_qp_connect's, and every provider's):
// timeout 14 (4.096 us * 2^14 = 67 ms), 7 retries, RNR retries without limit, RNR timer 12
// (0.64 ms).
inline constexpr uint8_t kQpDefaultTimeout = 14;
inline constexpr uint8_t kQpDefaultRetryCnt = 7;
inline constexpr uint8_t kQpDefaultRnrRetry = 7;
inline constexpr uint8_t kQpDefaultMinRnrTimer = 12;

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

// The attributes each transition takes, as verbs takes them (the IB spec's table of QP
// state transitions, for the attributes ibex has). The traffic class and the service level
// describe the path: INIT keeps them for RTR, as the verbs provider does. A transition to
// RESET or ERR takes the state alone.
inline unsigned qp_transition_attrs(ibex_qp_state_t from, ibex_qp_state_t to) {
    constexpr unsigned path = IBEX_QP_TRAFFIC_CLASS | IBEX_QP_SL;
    if (to == IBEX_QPS_RESET || to == IBEX_QPS_ERR) return IBEX_QP_STATE;
    if (from == IBEX_QPS_RESET || (from == IBEX_QPS_INIT && to == IBEX_QPS_INIT))
        return IBEX_QP_STATE | IBEX_QP_ACCESS_FLAGS | path;
    if (from == IBEX_QPS_INIT && to == IBEX_QPS_RTR)
        return IBEX_QP_STATE | IBEX_QP_ACCESS_FLAGS | IBEX_QP_PATH_MTU | IBEX_QP_DEST | IBEX_QP_RQ_PSN |
               IBEX_QP_MAX_RD_ATOMIC | IBEX_QP_MIN_RNR_TIMER | path;
    if (from == IBEX_QPS_RTR && to == IBEX_QPS_RTS)
        return IBEX_QP_STATE | IBEX_QP_ACCESS_FLAGS | IBEX_QP_SQ_PSN | IBEX_QP_TIMEOUT | IBEX_QP_RETRY_CNT |
               IBEX_QP_RNR_RETRY | IBEX_QP_MAX_RD_ATOMIC | IBEX_QP_MIN_RNR_TIMER;
    if (from == IBEX_QPS_RTS && to == IBEX_QPS_RTS) return IBEX_QP_STATE | IBEX_QP_ACCESS_FLAGS | IBEX_QP_MIN_RNR_TIMER;
    return IBEX_QP_STATE;
}

// The attribute names of `mask`, comma-separated, into buf (for error details).
inline const char *qp_attr_names(unsigned mask, char *buf, size_t len) {
    static const char *names[] = {"state",   "access flags", "path MTU",      "dest",          "rq_psn",
                                  "sq_psn",  "timeout",      "retry_cnt",     "rnr_retry",     "min_rnr_timer",
                                  "max_rd_atomic", "traffic class", "service level"};
    size_t used = 0;
    buf[0] = '\0';
    for (unsigned bit = 0; bit < sizeof names / sizeof names[0]; ++bit) {
        if (!(mask & (1u << bit))) continue;
        const int n = std::snprintf(buf + used, len - used, "%s%s", used ? ", " : "", names[bit]);
        if (n < 0 || size_t(n) >= len - used) {
            buf[used] = '\0'; // whole names only
            break;
        }
        used += size_t(n);
    }
    return buf;
}

// Queue sizes of ibex_create_qp (0: 1024) into *send_wr / *recv_wr, checked with the SGE
// counts against a software provider's limits; `cqs_ours`: both CQs are of the QP's context.
inline ibex_status_t check_qp_init(const ibex_qp_init_attr_t &a, uint32_t max_sge, bool cqs_ours, uint32_t *send_wr,
                                   uint32_t *recv_wr) {
    constexpr uint32_t kMaxWr = 1 << 16;
    *send_wr = a.max_send_wr ? a.max_send_wr : 1024;
    *recv_wr = a.max_recv_wr ? a.max_recv_wr : 1024;
    if (*send_wr > kMaxWr || *recv_wr > kMaxWr)
        return fail(IBEX_ERR_INVALID_ARGUMENT, "max_send_wr/max_recv_wr above %u", kMaxWr);
    if (a.max_send_sge > max_sge || a.max_recv_sge > max_sge)
        return fail(IBEX_ERR_INVALID_ARGUMENT, "at most %u SGEs per work request", max_sge);
    if (!cqs_ours) return fail(IBEX_ERR_INVALID_ARGUMENT, "the CQs belong to another context");
    return IBEX_OK;
}

// The range of each attribute named in mask, whatever the transition (ibex_modify_qp's
// check, and ibex_qp_connect_attr's before its first step).
inline ibex_status_t check_qp_attr_values(const ibex_qp_attr_t &a, unsigned mask) {
    if ((mask & IBEX_QP_PATH_MTU) && (a.path_mtu < IBEX_MTU_256 || a.path_mtu > IBEX_MTU_4096))
        return fail(IBEX_ERR_INVALID_ARGUMENT, "path_mtu %d is not an IB MTU (1..5)", a.path_mtu);
    if ((mask & IBEX_QP_RETRY_CNT) && a.retry_cnt > 7) return fail(IBEX_ERR_INVALID_ARGUMENT, "retry_cnt must be 0..7");
    if ((mask & IBEX_QP_RNR_RETRY) && a.rnr_retry > 7) return fail(IBEX_ERR_INVALID_ARGUMENT, "rnr_retry must be 0..7");
    if ((mask & IBEX_QP_TIMEOUT) && a.timeout > 31) return fail(IBEX_ERR_INVALID_ARGUMENT, "timeout must be 0..31");
    if ((mask & IBEX_QP_MIN_RNR_TIMER) && a.min_rnr_timer > 31)
        return fail(IBEX_ERR_INVALID_ARGUMENT, "min_rnr_timer must be 0..31");
    if ((mask & IBEX_QP_SL) && a.sl > 7)
        return fail(IBEX_ERR_INVALID_ARGUMENT, "sl %u: RoCE carries service levels 0..7 (the VLAN priority)", a.sl);
    return IBEX_OK;
}

// The checks of ibex_modify_qp every provider makes before its own (verbs included): the
// transition, that it takes each attribute named (qp_transition_attrs), the attribute
// ranges, and that INIT -> RTR names the peer.
inline ibex_status_t check_modify_common(uint32_t qpn, ibex_qp_state_t from, const ibex_qp_attr_t &a, unsigned mask) {
    const ibex_qp_state_t to = (mask & IBEX_QP_STATE) ? a.qp_state : from;
    if (!qp_transition_ok(from, to))
        return fail(IBEX_ERR_INVALID_STATE, "QP 0x%x: %s -> %s is not a valid transition", qpn, qp_state_name(from),
                    qp_state_name(to));
    if (const unsigned stray = mask & ~qp_transition_attrs(from, to)) {
        char names[160];
        return fail(IBEX_ERR_INVALID_ARGUMENT,
                    "QP 0x%x: %s -> %s does not take %s (verbs sets each attribute at one transition; see "
                    "ibex_modify_qp in ibex.h)",
                    qpn, qp_state_name(from), qp_state_name(to), qp_attr_names(stray, names, sizeof names));
    }
    if (from == IBEX_QPS_INIT && to == IBEX_QPS_RTR && !(mask & IBEX_QP_DEST))
        return fail(IBEX_ERR_INVALID_ARGUMENT, "INIT -> RTR needs IBEX_QP_DEST (the peer's address)");
    return check_qp_attr_values(a, mask);
}

// ibex_create_qp's first half for a software provider: the init attributes checked, the QP
// allocated with queues of their sizes, and the fields every such QP carries filled in
// (handles, its context, its CQs, sq_sig_all). Numbering and registration are the caller's.
template <class Qp, class Ctx>
ibex_status_t allocate_qp(ibex_pd *pd, Ctx *ctx, const ibex_qp_init_attr_t &a, uint32_t max_sge, Qp **out) {
    using Cq = std::remove_pointer_t<decltype(std::declval<Qp &>().scq)>;
    Cq *scq = static_cast<Cq *>(a.send_cq);
    Cq *rcq = static_cast<Cq *>(a.recv_cq);
    uint32_t send_wr, recv_wr;
    IBEX_TRY(check_qp_init(a, max_sge, scq->ctx == ctx && rcq->ctx == ctx, &send_wr, &recv_wr));
    auto *qp = new (std::nothrow) Qp(send_wr, recv_wr);
    if (!qp) return fail(IBEX_ERR_NO_MEMORY, "cannot allocate a QP");
    qp->pd = pd;
    qp->send_cq = a.send_cq;
    qp->recv_cq = a.recv_cq;
    qp->ctx = ctx;
    qp->scq = scq;
    qp->rcq = rcq;
    qp->sig_all = a.sq_sig_all != 0;
    *out = qp;
    return IBEX_OK;
}

} // namespace ibex
