// RC queue pairs: creation, the attribute sequence (through qp_attr), the address a peer
// connects to, and posting WR chains (through work_map).
#include <cerrno>
#include <cstring>
#include <random>

#include <infiniband/verbs.h>

#include "runtime/base/status.h"
#include "transport/verbs/objects.h"
#include "transport/verbs/ops.h"
#include "transport/verbs/qp_attr.h"
#include "transport/verbs/work_map.h"

namespace ibex::verbs {
namespace {

constexpr uint32_t kInline = 64; // inline bytes asked for (0 if the device refuses)
constexpr uint16_t kRoceUdpPort = 4791;

} // namespace

ibex_status_t create_qp(ibex_pd *p, const ibex_qp_init_attr_t *a, ibex_qp **out) {
    VerbsPd *pd = pd_of(p);
    VerbsContext *ctx = pd->vctx;
    if (cq_of(a->send_cq)->vctx != ctx || cq_of(a->recv_cq)->vctx != ctx)
        return fail(IBEX_ERR_INVALID_ARGUMENT, "the CQs belong to another context");
    ibv_qp_init_attr init{};
    init.send_cq = cq_of(a->send_cq)->ibv;
    init.recv_cq = cq_of(a->recv_cq)->ibv;
    init.qp_type = IBV_QPT_RC;
    init.sq_sig_all = a->sq_sig_all ? 1 : 0;
    init.cap.max_send_wr = a->max_send_wr ? a->max_send_wr : 1024;
    init.cap.max_recv_wr = a->max_recv_wr ? a->max_recv_wr : 1024;
    init.cap.max_send_sge = a->max_send_sge ? a->max_send_sge : 16;
    init.cap.max_recv_sge = a->max_recv_sge ? a->max_recv_sge : 16;
    init.cap.max_inline_data = kInline;
    ibv_qp *ibv = ibv_create_qp(pd->ibv, &init);
    if (!ibv && errno == EINVAL) {
        init.cap.max_inline_data = 0;
        ibv = ibv_create_qp(pd->ibv, &init);
    }
    if (!ibv) {
        const int e = errno;
        return fail_errno(status_from_errno(e), e, "ibv_create_qp(send %u x %u SGE, recv %u x %u SGE)", init.cap.max_send_wr,
                          init.cap.max_send_sge, init.cap.max_recv_wr, init.cap.max_recv_sge);
    }
    auto *qp = new (std::nothrow) VerbsQp;
    if (!qp) {
        ibv_destroy_qp(ibv);
        return fail(IBEX_ERR_NO_MEMORY, "cannot allocate a QP");
    }
    qp->pd = p;
    qp->send_cq = a->send_cq;
    qp->recv_cq = a->recv_cq;
    qp->qp_num = ibv->qp_num;
    qp->vctx = ctx;
    qp->ibv = ibv;
    std::random_device rd;
    qp->mem.initial_sq_psn = rd() & 0xffffff;
    qp->mem.traffic_class = ctx->traffic_class;
    qp->mem.qp_num = qp->qp_num;
    Lock l(ctx->mutex);
    ++pd->users;
    ++cq_of(a->send_cq)->users;
    ++cq_of(a->recv_cq)->users;
    *out = qp;
    return IBEX_OK;
}

ibex_status_t destroy_qp(ibex_qp *q) {
    VerbsQp *qp = qp_of(q);
    if (int e = ibv_destroy_qp(qp->ibv)) return fail_errno(status_from_errno(e), e, "ibv_destroy_qp");
    {
        Lock l(qp->vctx->mutex);
        --pd_of(qp->pd)->users;
        --cq_of(qp->send_cq)->users;
        --cq_of(qp->recv_cq)->users;
    }
    delete qp;
    return IBEX_OK;
}

ibex_status_t modify_qp(ibex_qp *q, const ibex_qp_attr_t *a, unsigned mask) {
    VerbsQp *qp = qp_of(q);
    Lock l(qp->mutex);
    VerbsModify m;
    IBEX_TRY(build_modify(*a, mask, qp->mem, qp->vctx->port, &m));
    if (int e = ibv_modify_qp(qp->ibv, &m.attr, m.mask))
        return fail_errno(status_from_errno(e), e, "ibv_modify_qp(QP 0x%x, mask 0x%x)", qp->qp_num, m.mask);
    commit_modify(*a, mask, &qp->mem);
    return IBEX_OK;
}

ibex_status_t query_qp(ibex_qp *q, ibex_qp_attr_t *a) {
    VerbsQp *qp = qp_of(q);
    ibv_qp_attr v{};
    ibv_qp_init_attr init{};
    const int mask = IBV_QP_STATE | IBV_QP_ACCESS_FLAGS | IBV_QP_PATH_MTU | IBV_QP_AV | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                     IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MIN_RNR_TIMER |
                     IBV_QP_MAX_QP_RD_ATOMIC;
    if (int e = ibv_query_qp(qp->ibv, &v, mask, &init)) return fail_errno(status_from_errno(e), e, "ibv_query_qp");
    Lock l(qp->mutex);
    a->qp_state = static_cast<ibex_qp_state_t>(v.qp_state);
    a->qp_access_flags = static_cast<unsigned>(v.qp_access_flags) & 0xf;
    a->path_mtu = static_cast<ibex_mtu_t>(v.path_mtu);
    std::memset(&a->dest, 0, sizeof a->dest);
    std::memcpy(a->dest.gid, v.ah_attr.grh.dgid.raw, 16);
    a->dest.udp_port = kRoceUdpPort;
    a->dest.qpn = v.dest_qp_num;
    a->dest.mtu = static_cast<uint8_t>(v.path_mtu);
    a->rq_psn = v.rq_psn;
    a->sq_psn = v.sq_psn;
    a->timeout = v.timeout;
    a->retry_cnt = v.retry_cnt;
    a->rnr_retry = v.rnr_retry;
    a->min_rnr_timer = v.min_rnr_timer;
    a->max_rd_atomic = v.max_rd_atomic;
    a->traffic_class = qp->mem.traffic_class;
    a->sl = v.ah_attr.sl;
    a->qp_num = qp->qp_num;
    return IBEX_OK;
}

ibex_status_t qp_local_addr(ibex_qp *q, ibex_ep_addr_t *out) {
    VerbsQp *qp = qp_of(q);
    std::memset(out, 0, sizeof *out);
    std::memcpy(out->gid, qp->vctx->gid.raw, 16);
    out->udp_port = kRoceUdpPort;
    out->mtu = static_cast<uint8_t>(qp->vctx->port.active_mtu);
    out->qpn = qp->qp_num;
    Lock l(qp->mutex);
    out->psn = qp->mem.initial_sq_psn;
    return IBEX_OK;
}

ibex_status_t post_send(ibex_qp *q, ibex_send_wr_t *wr, ibex_send_wr_t **bad) {
    ibv_qp *ibv = qp_of(q)->ibv;
    return post_send_chain(wr, bad, q->qp_num, [ibv](ibv_send_wr *w, ibv_send_wr **b) { return ibv_post_send(ibv, w, b); });
}

ibex_status_t post_recv(ibex_qp *q, ibex_recv_wr_t *wr, ibex_recv_wr_t **bad) {
    ibv_qp *ibv = qp_of(q)->ibv;
    return post_recv_chain(wr, bad, q->qp_num, [ibv](ibv_recv_wr *w, ibv_recv_wr **b) { return ibv_post_recv(ibv, w, b); });
}

} // namespace ibex::verbs
