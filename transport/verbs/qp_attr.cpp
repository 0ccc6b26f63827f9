#include "transport/verbs/qp_attr.h"

#include <algorithm>
#include <cstring>

#include "runtime/base/status.h"
#include "transport/qp_state.h"

namespace ibex::verbs {
namespace {

static_assert(int(IBEX_QPS_RESET) == IBV_QPS_RESET && int(IBEX_QPS_INIT) == IBV_QPS_INIT &&
              int(IBEX_QPS_RTR) == IBV_QPS_RTR && int(IBEX_QPS_RTS) == IBV_QPS_RTS &&
              int(IBEX_QPS_SQD) == IBV_QPS_SQD && int(IBEX_QPS_SQE) == IBV_QPS_SQE && int(IBEX_QPS_ERR) == IBV_QPS_ERR);
static_assert(int(IBEX_MTU_256) == IBV_MTU_256 && int(IBEX_MTU_4096) == IBV_MTU_4096);
static_assert(int(IBEX_ACCESS_LOCAL_WRITE) == IBV_ACCESS_LOCAL_WRITE &&
              int(IBEX_ACCESS_REMOTE_WRITE) == IBV_ACCESS_REMOTE_WRITE &&
              int(IBEX_ACCESS_REMOTE_READ) == IBV_ACCESS_REMOTE_READ &&
              int(IBEX_ACCESS_REMOTE_ATOMIC) == IBV_ACCESS_REMOTE_ATOMIC);

constexpr uint32_t kPsnMask = 0xffffff;

} // namespace

ibv_mtu roce_mtu_for_netdev(int netdev_mtu) {
    const int payload = netdev_mtu - (40 + 8 + 12 + 32 + 4);
    for (int m = IBV_MTU_4096; m > IBV_MTU_256; --m)
        if (payload >= (128 << m)) return static_cast<ibv_mtu>(m);
    return IBV_MTU_256;
}

ibex_status_t build_modify(const ibex_qp_attr_t &a, unsigned mask, const QpMemory &mem, const PortFacts &port,
                           VerbsModify *out) {
    *out = VerbsModify{};
    ibv_qp_attr &v = out->attr;
    const ibex_qp_state_t from = mem.state;
    const ibex_qp_state_t to = (mask & IBEX_QP_STATE) ? a.qp_state : from;
    IBEX_TRY(check_modify_common(mem.qp_num, from, a, mask));
    if ((mask & IBEX_QP_PATH_MTU) && int(a.path_mtu) > int(port.active_mtu))
        return fail(IBEX_ERR_INVALID_ARGUMENT, "path MTU %d exceeds the port's active MTU %d", 128 << a.path_mtu,
                    128 << port.active_mtu);

    v.qp_state = static_cast<ibv_qp_state>(to);
    if (mask & IBEX_QP_STATE) out->mask |= IBV_QP_STATE;
    if (to == IBEX_QPS_RESET || to == IBEX_QPS_ERR) {
        out->mask = IBV_QP_STATE;
        return IBEX_OK;
    }

    if (from == IBEX_QPS_RESET && to == IBEX_QPS_INIT) {
        v.pkey_index = 0;
        v.port_num = port.port_num;
        v.qp_access_flags = (mask & IBEX_QP_ACCESS_FLAGS) ? a.qp_access_flags : 0;
        out->mask |= IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
        return IBEX_OK;
    }
    if (mask & IBEX_QP_ACCESS_FLAGS) {
        v.qp_access_flags = a.qp_access_flags;
        out->mask |= IBV_QP_ACCESS_FLAGS;
    }
    if (from == IBEX_QPS_INIT && to == IBEX_QPS_INIT) return IBEX_OK;

    if (from == IBEX_QPS_INIT && to == IBEX_QPS_RTR) {
        if (port.gid_index < 0) return fail(IBEX_ERR_INVALID_STATE, "the port has no usable RoCE v2 GID");
        ibv_ah_attr &ah = v.ah_attr;
        ah.is_global = 1;
        ah.port_num = port.port_num;
        ah.sl = (mask & IBEX_QP_SL) ? a.sl : mem.sl >= 0 ? uint8_t(mem.sl) : port.sl;
        ah.dlid = 0; // RoCE routes by GID
        std::memcpy(ah.grh.dgid.raw, a.dest.gid, 16);
        ah.grh.sgid_index = static_cast<uint8_t>(port.gid_index);
        ah.grh.hop_limit = port.hop_limit;
        // The low two bits are ECN: the RNIC sets ECT itself when DCQCN is enabled for
        // the priority, so only the DSCP is passed down.
        ah.grh.traffic_class = static_cast<uint8_t>(((mask & IBEX_QP_TRAFFIC_CLASS) ? a.traffic_class : mem.traffic_class) & 0xfc);
        v.dest_qp_num = a.dest.qpn & kPsnMask;
        v.rq_psn = ((mask & IBEX_QP_RQ_PSN) ? a.rq_psn : a.dest.psn) & kPsnMask;
        if (mask & IBEX_QP_PATH_MTU) {
            v.path_mtu = static_cast<ibv_mtu>(a.path_mtu);
        } else {
            int m = port.active_mtu;
            if (a.dest.mtu >= IBEX_MTU_256 && a.dest.mtu <= IBEX_MTU_4096) m = std::min<int>(m, a.dest.mtu);
            v.path_mtu = static_cast<ibv_mtu>(m);
        }
        v.max_dest_rd_atomic = (mask & IBEX_QP_MAX_RD_ATOMIC) ? std::min(a.max_rd_atomic, port.max_dest_rd_atomic)
                                                              : port.max_dest_rd_atomic;
        v.min_rnr_timer = (mask & IBEX_QP_MIN_RNR_TIMER) ? a.min_rnr_timer : kQpDefaultMinRnrTimer;
        out->mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
                     IBV_QP_MIN_RNR_TIMER;
        return IBEX_OK;
    }
    if (from == IBEX_QPS_RTR && to == IBEX_QPS_RTS) {
        v.timeout = (mask & IBEX_QP_TIMEOUT) ? a.timeout : kQpDefaultTimeout;
        v.retry_cnt = (mask & IBEX_QP_RETRY_CNT) ? a.retry_cnt : kQpDefaultRetryCnt;
        v.rnr_retry = (mask & IBEX_QP_RNR_RETRY) ? a.rnr_retry : kQpDefaultRnrRetry;
        v.sq_psn = ((mask & IBEX_QP_SQ_PSN) ? a.sq_psn : mem.initial_sq_psn) & kPsnMask;
        v.max_rd_atomic = (mask & IBEX_QP_MAX_RD_ATOMIC) ? std::min(a.max_rd_atomic, port.max_rd_atomic) : port.max_rd_atomic;
        out->mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC;
        if (mask & IBEX_QP_MIN_RNR_TIMER) {
            v.min_rnr_timer = a.min_rnr_timer;
            out->mask |= IBV_QP_MIN_RNR_TIMER;
        }
        return IBEX_OK;
    }
    // RTS -> RTS (check_modify_common let through only what verbs takes here).
    if (mask & IBEX_QP_MIN_RNR_TIMER) {
        v.min_rnr_timer = a.min_rnr_timer;
        out->mask |= IBV_QP_MIN_RNR_TIMER;
    }
    return IBEX_OK;
}

void commit_modify(const ibex_qp_attr_t &a, unsigned mask, QpMemory *mem) {
    if (mask & IBEX_QP_TRAFFIC_CLASS) mem->traffic_class = a.traffic_class;
    if (mask & IBEX_QP_SL) mem->sl = a.sl;
    if (mask & IBEX_QP_SQ_PSN) mem->initial_sq_psn = a.sq_psn & kPsnMask;
    if (mask & IBEX_QP_STATE) mem->state = a.qp_state;
}

} // namespace ibex::verbs
