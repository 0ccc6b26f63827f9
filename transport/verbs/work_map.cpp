#include "transport/verbs/work_map.h"

#include "runtime/base/c_enum.h"
#include "runtime/base/status.h"

#include <arpa/inet.h>
#include <cerrno>

namespace ibex::verbs {
namespace {

static_assert(sizeof(ibex_sge_t) == sizeof(ibv_sge) && offsetof(ibex_sge_t, addr) == offsetof(ibv_sge, addr) &&
              offsetof(ibex_sge_t, length) == offsetof(ibv_sge, length) &&
              offsetof(ibex_sge_t, lkey) == offsetof(ibv_sge, lkey));
static_assert(int(IBEX_WR_RDMA_WRITE) == IBV_WR_RDMA_WRITE && int(IBEX_WR_RDMA_WRITE_WITH_IMM) == IBV_WR_RDMA_WRITE_WITH_IMM &&
              int(IBEX_WR_SEND) == IBV_WR_SEND && int(IBEX_WR_SEND_WITH_IMM) == IBV_WR_SEND_WITH_IMM &&
              int(IBEX_WR_RDMA_READ) == IBV_WR_RDMA_READ && int(IBEX_WR_ATOMIC_CMP_AND_SWP) == IBV_WR_ATOMIC_CMP_AND_SWP &&
              int(IBEX_WR_ATOMIC_FETCH_AND_ADD) == IBV_WR_ATOMIC_FETCH_AND_ADD);
static_assert(int(IBEX_SEND_FENCE) == IBV_SEND_FENCE && int(IBEX_SEND_SIGNALED) == IBV_SEND_SIGNALED &&
              int(IBEX_SEND_SOLICITED) == IBV_SEND_SOLICITED && int(IBEX_SEND_INLINE) == IBV_SEND_INLINE);
static_assert(int(IBEX_WC_SUCCESS) == IBV_WC_SUCCESS && int(IBEX_WC_WR_FLUSH_ERR) == IBV_WC_WR_FLUSH_ERR &&
              int(IBEX_WC_REM_ACCESS_ERR) == IBV_WC_REM_ACCESS_ERR && int(IBEX_WC_RETRY_EXC_ERR) == IBV_WC_RETRY_EXC_ERR &&
              int(IBEX_WC_GENERAL_ERR) == IBV_WC_GENERAL_ERR);
static_assert(int(IBEX_WC_WITH_IMM) == IBV_WC_WITH_IMM);

ibex_status_t check_send(const ibex_send_wr_t &wr) {
    if (!c_enum_in(wr.opcode, IBEX_WR_RDMA_WRITE, IBEX_WR_ATOMIC_FETCH_AND_ADD))
        return fail(IBEX_ERR_INVALID_ARGUMENT, "unknown work request opcode %d", c_enum_value(wr.opcode));
    if (wr.num_sge < 0 || (wr.num_sge && !wr.sg_list))
        return fail(IBEX_ERR_INVALID_ARGUMENT, "num_sge %d with sg_list %p", wr.num_sge, static_cast<void *>(wr.sg_list));
    return IBEX_OK;
}

ibex_status_t check_recv(const ibex_recv_wr_t &wr) {
    if (wr.num_sge < 0 || (wr.num_sge && !wr.sg_list))
        return fail(IBEX_ERR_INVALID_ARGUMENT, "num_sge %d with sg_list %p", wr.num_sge, static_cast<void *>(wr.sg_list));
    return IBEX_OK;
}

template <typename IbexWr, typename IbvWr, typename Check, typename Convert, typename Post>
ibex_status_t post_chain(IbexWr *wr, IbexWr **bad, uint32_t qpn, Check check, Convert convert, const Post &post,
                         const char *what) {
    IbvWr batch[kPostBatch];
    while (wr) {
        int n = 0;
        IbexWr *w = wr;
        ibex_status_t invalid = IBEX_OK;
        for (; w && n < kPostBatch; w = w->next, ++n)
            if ((invalid = check(*w)) != IBEX_OK) break;
        if (n) {
            convert(wr, batch, n);
            IbvWr *bad_v = nullptr;
            if (const int e = post(batch, &bad_v)) {
                IbexWr *b = wr;
                for (IbvWr *x = batch; x && x != bad_v && b; x = x->next) b = b->next;
                if (bad) *bad = b;
                return fail_errno(e == ENOMEM ? IBEX_ERR_QUEUE_FULL : status_from_errno(e), e, "%s on QP 0x%x", what, qpn);
            }
        }
        if (invalid != IBEX_OK) {
            if (bad) *bad = w;
            return invalid;
        }
        wr = w;
    }
    if (bad) *bad = nullptr;
    return IBEX_OK;
}

} // namespace

ibex_wc_status_t map_wc_status(int s) {
    // 0..21 are the same statuses in both; later verbs additions (tag matching, ...)
    // are errors ibex has no name for.
    if (s >= IBV_WC_SUCCESS && s <= IBV_WC_GENERAL_ERR) return static_cast<ibex_wc_status_t>(s);
    return IBEX_WC_GENERAL_ERR;
}

bool map_wc_opcode(int op, ibex_wc_opcode_t *out) {
    switch (op) {
    case IBV_WC_SEND: *out = IBEX_WC_SEND; return true;
    case IBV_WC_RDMA_WRITE: *out = IBEX_WC_RDMA_WRITE; return true;
    case IBV_WC_RDMA_READ: *out = IBEX_WC_RDMA_READ; return true;
    case IBV_WC_COMP_SWAP: *out = IBEX_WC_COMP_SWAP; return true;
    case IBV_WC_FETCH_ADD: *out = IBEX_WC_FETCH_ADD; return true;
    case IBV_WC_RECV: *out = IBEX_WC_RECV; return true;
    case IBV_WC_RECV_RDMA_WITH_IMM: *out = IBEX_WC_RECV_RDMA_WITH_IMM; return true;
    default: return false;
    }
}

void convert_wc(const ibv_wc &in, ibex_wc_t *out) {
    *out = ibex_wc_t{};
    out->wr_id = in.wr_id;
    out->status = map_wc_status(in.status);
    // The opcode of an error completion is undefined in verbs; ibex reports SEND for an
    // unknown one rather than an out-of-range value.
    if (!map_wc_opcode(in.opcode, &out->opcode)) out->opcode = IBEX_WC_SEND;
    out->vendor_err = in.vendor_err;
    out->byte_len = in.byte_len;
    out->qp_num = in.qp_num;
    out->src_qp = in.src_qp;
    out->wc_flags = in.wc_flags & IBV_WC_WITH_IMM;
    if (in.status == IBV_WC_SUCCESS && (in.wc_flags & IBV_WC_WITH_IMM)) out->imm_data = ntohl(in.imm_data);
}

ibex_status_t status_from_errno(int e) {
    switch (e) {
    case 0: return IBEX_OK;
    case ENOMEM: return IBEX_ERR_NO_MEMORY;
    case EINVAL: return IBEX_ERR_INVALID_ARGUMENT;
    case EOPNOTSUPP:
    case ENOSYS: return IBEX_ERR_NOT_SUPPORTED;
    case ENODEV:
    case ENXIO: return IBEX_ERR_NO_DEVICE;
    case EBUSY: return IBEX_ERR_INVALID_STATE;
    case EAGAIN: return IBEX_ERR_QUEUE_FULL;
    case ETIMEDOUT: return IBEX_ERR_TIMEOUT;
    default: return IBEX_ERR_SYSTEM;
    }
}

int convert_send_chain(ibex_send_wr_t *wr, ibv_send_wr *out, int max) {
    int n = 0;
    for (; wr && n < max; wr = wr->next, ++n) {
        ibv_send_wr &v = out[n];
        v = ibv_send_wr{};
        v.wr_id = wr->wr_id;
        v.sg_list = reinterpret_cast<ibv_sge *>(wr->sg_list);
        v.num_sge = wr->num_sge;
        v.opcode = static_cast<ibv_wr_opcode>(wr->opcode);
        v.send_flags = wr->send_flags;
        if (wr->opcode == IBEX_WR_SEND_WITH_IMM || wr->opcode == IBEX_WR_RDMA_WRITE_WITH_IMM)
            v.imm_data = htonl(wr->imm_data);
        if (wr->opcode == IBEX_WR_ATOMIC_CMP_AND_SWP || wr->opcode == IBEX_WR_ATOMIC_FETCH_AND_ADD) {
            v.wr.atomic.remote_addr = wr->wr.atomic.remote_addr;
            v.wr.atomic.compare_add = wr->wr.atomic.compare_add;
            v.wr.atomic.swap = wr->wr.atomic.swap;
            v.wr.atomic.rkey = wr->wr.atomic.rkey;
        } else {
            v.wr.rdma.remote_addr = wr->wr.rdma.remote_addr;
            v.wr.rdma.rkey = wr->wr.rdma.rkey;
        }
        v.next = nullptr;
        if (n) out[n - 1].next = &v;
    }
    return n;
}

int convert_recv_chain(ibex_recv_wr_t *wr, ibv_recv_wr *out, int max) {
    int n = 0;
    for (; wr && n < max; wr = wr->next, ++n) {
        ibv_recv_wr &v = out[n];
        v.wr_id = wr->wr_id;
        v.sg_list = reinterpret_cast<ibv_sge *>(wr->sg_list);
        v.num_sge = wr->num_sge;
        v.next = nullptr;
        if (n) out[n - 1].next = &v;
    }
    return n;
}

ibex_status_t post_send_chain(ibex_send_wr_t *wr, ibex_send_wr_t **bad, uint32_t qpn, const SendPostFn &post) {
    return post_chain<ibex_send_wr_t, ibv_send_wr>(wr, bad, qpn, check_send, convert_send_chain, post, "ibv_post_send");
}

ibex_status_t post_recv_chain(ibex_recv_wr_t *wr, ibex_recv_wr_t **bad, uint32_t qpn, const RecvPostFn &post) {
    return post_chain<ibex_recv_wr_t, ibv_recv_wr>(wr, bad, qpn, check_recv, convert_recv_chain, post, "ibv_post_recv");
}

} // namespace ibex::verbs
