// Queue pairs: creation, state changes (checked here, applied by the engine:
// SoftQp::apply in engine/qp_state.cpp), queries.
#include <cstring>
#include <random>

#include "runtime/base/status.h"
#include "transport/qp_state.h"
#include "transport/soft/codec/roce.h"
#include "transport/soft/engine/staging.h"
#include "transport/soft/soft_ops.h"

namespace ibex::soft::ops {

namespace {


bool dest_from_gid(const ibex_ep_addr_t &ep, NetAddr *out) {
    static const uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    if (std::memcmp(ep.gid, prefix, sizeof prefix) != 0) return false;
    out->ip = roce::get32(ep.gid + 12);
    out->port = ep.udp_port ? ep.udp_port : roce::kUdpPort;
    return true;
}

// What ibex_modify_qp may not ask of the QP in its current state; `dest` gets the peer
// address that a.dest names (lock held).
ibex_status_t check_modify(const SoftQp &qp, const ibex_qp_attr_t &a, unsigned mask, NetAddr *dest) {
    IBEX_TRY(check_modify_common(qp.qp_num, qp.state, a, mask));
    if ((mask & IBEX_QP_PATH_MTU) && a.path_mtu > qp.ctx->port().max_mtu())
        return fail(IBEX_ERR_INVALID_ARGUMENT, "path MTU %d exceeds what the port carries (%d)",
                    roce::mtu_bytes(static_cast<uint8_t>(a.path_mtu)), roce::mtu_bytes(qp.ctx->port().max_mtu()));
    if ((mask & IBEX_QP_DEST) && !dest_from_gid(a.dest, dest))
        return fail(IBEX_ERR_NOT_SUPPORTED, "the udp port reaches IPv4 peers only (GID must be ::ffff:a.b.c.d)");
    return IBEX_OK;
}

} // namespace

ibex_status_t create_qp(ibex_pd *pd, const ibex_qp_init_attr_t *a, ibex_qp **out) {
    SoftContext *ctx = ctx_of(pd);
    SoftQp *qp = nullptr;
    IBEX_TRY(allocate_qp(pd, ctx, *a, kMaxSge, &qp));
    qp->mtu_enum = ctx->port().max_mtu();
    qp->take_path(ctx->config().path);
    qp->mtu = static_cast<uint32_t>(roce::mtu_bytes(qp->mtu_enum));
    Lock l(ctx->mutex());
    qp->qp_num = ctx->add_qp(qp);
    if (!qp->qp_num) {
        delete qp;
        return fail(IBEX_ERR_NO_MEMORY, "too many QPs on this context");
    }
    std::mt19937 rng(qp->qp_num ^ static_cast<uint32_t>(SoftContext::now_ns()));
    qp->sq_psn = rng() & roce::kPsnMask;
    ++qp->scq->users;
    ++qp->rcq->users;
    ++static_cast<SoftPd *>(pd)->users;
    *out = qp;
    return IBEX_OK;
}

ibex_status_t destroy_qp(ibex_qp *q) {
    SoftQp *qp = qp_of(q);
    {
        Lock l(qp->ctx->mutex());
        qp->ctx->remove_qp(qp);
        staging::forget_qp(*qp->ctx, *qp);
        --qp->scq->users;
        --qp->rcq->users;
        --static_cast<SoftPd *>(qp->pd)->users;
    }
    delete qp;
    return IBEX_OK;
}

ibex_status_t modify_qp(ibex_qp *q, const ibex_qp_attr_t *a, unsigned mask) {
    SoftQp *qp = qp_of(q);
    Lock l(qp->ctx->mutex());
    NetAddr dest;
    IBEX_TRY(check_modify(*qp, *a, mask, &dest));
    qp->apply(*a, mask, dest);
    return IBEX_OK;
}

ibex_status_t query_qp(ibex_qp *q, ibex_qp_attr_t *a) {
    SoftQp *qp = qp_of(q);
    Lock l(qp->ctx->mutex());
    qp->report(a);
    std::memset(&a->dest, 0, sizeof a->dest);
    a->dest.gid[10] = a->dest.gid[11] = 0xff;
    roce::put32(a->dest.gid + 12, qp->dest.ip);
    a->dest.udp_port = qp->dest.port;
    a->dest.qpn = qp->dest_qpn;
    a->dest.mtu = qp->mtu_enum;
    a->rq_psn = qp->epsn;
    a->sq_psn = qp->sq_psn;
    a->qp_num = qp->qp_num;
    return IBEX_OK;
}

ibex_status_t qp_local_addr(ibex_qp *q, ibex_ep_addr_t *out) {
    SoftQp *qp = qp_of(q);
    Lock l(qp->ctx->mutex());
    std::memset(out, 0, sizeof *out);
    const NetAddr local = qp->ctx->port().local();
    out->gid[10] = out->gid[11] = 0xff;
    roce::put32(out->gid + 12, local.ip);
    out->udp_port = local.port;
    out->mtu = qp->ctx->port().max_mtu();
    out->qpn = qp->qp_num;
    out->psn = qp->sq_psn;
    return IBEX_OK;
}

} // namespace ibex::soft::ops
