// The C API: argument checks that need no provider, then dispatch through the
// provider's ops table. A null entry answers IBEX_ERR_NOT_SUPPORTED. Nothing here throws.
#include <cstring>
#include <string>

#include "runtime/binding_defaults.h"
#include "runtime/qp_connect.h"
#include "runtime/base/status.h"
#include "transport/provider.h"
#include "transport/qp_state.h"

using ibex::fail;

namespace {

constexpr int kMaxCqe = 1 << 22;

template <typename T>
bool attr_ok(const T *a, uint32_t magic, const char *what, ibex_status_t *st) {
    if (a->size < offsetof(T, magic) + sizeof(uint32_t) || a->magic != magic) {
        *st = fail(IBEX_ERR_INVALID_ARGUMENT, "%s: bad size/magic (initialise it with its _INIT macro)", what);
        return false;
    }
    if (a->size > sizeof(T)) {
        *st = fail(IBEX_ERR_INVALID_ARGUMENT, "%s: size %u is newer than this library (%zu)", what, a->size, sizeof(T));
        return false;
    }
    return true;
}

// Copies a caller's structure of possibly older (smaller) layout into a full one.
template <typename T>
T widen(const T *a, const T &defaults) {
    T out = defaults;
    std::memcpy(&out, a, a->size < sizeof(T) ? a->size : sizeof(T));
    return out;
}

#define IBEX_CHECK_NULL(p, what)                                                                          \
    do {                                                                                                  \
        if (!(p)) return fail(IBEX_ERR_INVALID_ARGUMENT, "%s: %s is NULL", __func__, what);               \
    } while (0)

#define IBEX_DISPATCH(ops, fn, ...)                                                                       \
    ((ops)->fn ? (ops)->fn(__VA_ARGS__)                                                                   \
               : fail(IBEX_ERR_NOT_SUPPORTED, "%s: provider \"%s\" does not support this", __func__,      \
                      (ops)->name))

// The QP's provider table: cached in the handle by ibex_create_qp; a handle made another
// way (a provider's own tests) goes through its context.
inline const ibex::ProviderOps *qp_ops(const ibex_qp_t *qp) { return qp->ops ? qp->ops : qp->pd->context->ops; }

// An output structure's leading size (the caller's sizeof): at least its first two fields,
// and no larger than this library's structure (an older, smaller layout is served).
template <typename T>
ibex_status_t check_out_size(const T *out, const char *type) {
    if (out->size < 2 * sizeof(uint32_t) || out->size > sizeof(T))
        return fail(IBEX_ERR_INVALID_ARGUMENT, "%s: set size to sizeof(%s)", type, type);
    return IBEX_OK;
}

// A per-QP query's arguments: both present, and the structure's size as above.
template <typename T>
ibex_status_t check_qp_query(const char *fn, const ibex_qp_t *qp, const T *out, const char *out_name, const char *type) {
    if (!qp) return fail(IBEX_ERR_INVALID_ARGUMENT, "%s: qp is NULL", fn);
    if (!out) return fail(IBEX_ERR_INVALID_ARGUMENT, "%s: %s is NULL", fn, out_name);
    return check_out_size(out, type);
}

} // namespace

extern "C" {

ibex_status_t ibex_open_device(const char *device, const ibex_context_attr_t *attr, ibex_context_t **context) {
    ibex::clear_error();
    IBEX_CHECK_NULL(device, "device");
    IBEX_CHECK_NULL(context, "context");
    *context = nullptr;
    ibex_context_attr_t a = IBEX_CONTEXT_ATTR_INIT;
    if (attr) {
        ibex_status_t st;
        if (!attr_ok(attr, IBEX_MAGIC_CONTEXT_ATTR, "ibex_context_attr_t", &st)) return st;
        a = widen(attr, a);
    }
    const ibex::ProviderOps *ops = ibex::provider_for(device);
    if (!ops) {
        std::string known;
        std::vector<ibex::DeviceEntry> devs;
        for (auto *p : ibex::providers())
            if (p->list_devices) p->list_devices(devs);
        for (auto &d : devs) known += (known.empty() ? "" : ", ") + d.name;
        return fail(IBEX_ERR_NO_DEVICE, "no provider serves device \"%s\" (available: %s)", device, known.c_str());
    }
    std::string cpus;
    if (!a.progress_cpus) {
        cpus = ibex::progress_cpus_for(device);
        if (!cpus.empty()) a.progress_cpus = cpus.c_str();
    }
    return IBEX_DISPATCH(ops, open_device, device, &a, context);
}

ibex_status_t ibex_close_device(ibex_context_t *context) {
    IBEX_CHECK_NULL(context, "context");
    return IBEX_DISPATCH(context->ops, close_device, context);
}

const char *ibex_context_device_name(const ibex_context_t *context) {
    return context ? context->device_name.c_str() : "";
}

ibex_status_t ibex_set_faults(ibex_context_t *context, const ibex_fault_config_t *faults) {
    IBEX_CHECK_NULL(context, "context");
    IBEX_CHECK_NULL(faults, "faults");
    ibex_status_t st;
    if (!attr_ok(faults, IBEX_MAGIC_FAULTS, "ibex_fault_config_t", &st)) return st;
    ibex_fault_config_t f = IBEX_FAULT_CONFIG_INIT;
    f = widen(faults, f);
    return IBEX_DISPATCH(context->ops, set_faults, context, &f);
}

ibex_status_t ibex_query_counters(ibex_context_t *context, ibex_counters_t *counters) {
    IBEX_CHECK_NULL(context, "context");
    IBEX_CHECK_NULL(counters, "counters");
    IBEX_TRY(check_out_size(counters, "ibex_counters_t"));
    return IBEX_DISPATCH(context->ops, query_counters, context, counters);
}

ibex_status_t ibex_query_device(ibex_context_t *context, ibex_device_attr_t *attr) {
    IBEX_CHECK_NULL(context, "context");
    IBEX_CHECK_NULL(attr, "attr");
    IBEX_TRY(check_out_size(attr, "ibex_device_attr_t"));
    // The provider fills a whole structure; the caller gets the fields its size holds, and
    // nothing at all on failure.
    ibex_device_attr_t full{};
    full.size = sizeof full;
    IBEX_TRY(IBEX_DISPATCH(context->ops, query_device, context, &full));
    const uint32_t size = attr->size;
    std::memcpy(attr, &full, size);
    attr->size = size;
    return IBEX_OK;
}

ibex_status_t ibex_progress(ibex_context_t *context) {
    IBEX_CHECK_NULL(context, "context");
    return IBEX_DISPATCH(context->ops, progress, context);
}

ibex_status_t ibex_alloc_pd(ibex_context_t *context, ibex_pd_t **pd) {
    IBEX_CHECK_NULL(context, "context");
    IBEX_CHECK_NULL(pd, "pd");
    return IBEX_DISPATCH(context->ops, alloc_pd, context, pd);
}

ibex_status_t ibex_dealloc_pd(ibex_pd_t *pd) {
    IBEX_CHECK_NULL(pd, "pd");
    return IBEX_DISPATCH(pd->context->ops, dealloc_pd, pd);
}

ibex_status_t ibex_reg_mr(ibex_pd_t *pd, void *addr, size_t length, unsigned access, ibex_mr_t **mr) {
    IBEX_CHECK_NULL(pd, "pd");
    IBEX_CHECK_NULL(mr, "mr");
    IBEX_CHECK_NULL(addr, "addr");
    if (!length) return fail(IBEX_ERR_INVALID_ARGUMENT, "ibex_reg_mr: length is 0");
    if (access & ~0xfu) return fail(IBEX_ERR_INVALID_ARGUMENT, "ibex_reg_mr: unknown access bits 0x%x", access & ~0xfu);
    if ((access & (IBEX_ACCESS_REMOTE_WRITE | IBEX_ACCESS_REMOTE_ATOMIC)) && !(access & IBEX_ACCESS_LOCAL_WRITE))
        return fail(IBEX_ERR_INVALID_ARGUMENT, "ibex_reg_mr: remote write/atomic access needs IBEX_ACCESS_LOCAL_WRITE");
    return IBEX_DISPATCH(pd->context->ops, reg_mr, pd, addr, length, access, mr);
}

ibex_status_t ibex_dereg_mr(ibex_mr_t *mr) {
    IBEX_CHECK_NULL(mr, "mr");
    return IBEX_DISPATCH(mr->pd->context->ops, dereg_mr, mr);
}

ibex_status_t ibex_mr_query(const ibex_mr_t *mr, ibex_mr_info_t *info) {
    IBEX_CHECK_NULL(mr, "mr");
    IBEX_CHECK_NULL(info, "info");
    *info = {mr->addr, mr->length, mr->lkey, mr->rkey, mr->access};
    return IBEX_OK;
}

uint32_t ibex_mr_lkey(const ibex_mr_t *mr) { return mr ? mr->lkey : 0; }
uint32_t ibex_mr_rkey(const ibex_mr_t *mr) { return mr ? mr->rkey : 0; }

ibex_status_t ibex_create_cq(ibex_context_t *context, int cqe, ibex_cq_t **cq) {
    IBEX_CHECK_NULL(context, "context");
    IBEX_CHECK_NULL(cq, "cq");
    if (cqe < 1 || cqe > kMaxCqe) return fail(IBEX_ERR_INVALID_ARGUMENT, "ibex_create_cq: cqe %d not in 1..%d", cqe, kMaxCqe);
    return IBEX_DISPATCH(context->ops, create_cq, context, cqe, cq);
}

ibex_status_t ibex_destroy_cq(ibex_cq_t *cq) {
    IBEX_CHECK_NULL(cq, "cq");
    return IBEX_DISPATCH(cq->context->ops, destroy_cq, cq);
}

ibex_status_t ibex_poll_cq(ibex_cq_t *cq, int max, ibex_wc_t *wc, int *count) {
    IBEX_CHECK_NULL(cq, "cq");
    IBEX_CHECK_NULL(count, "count");
    *count = 0;
    if (max < 0 || (max > 0 && !wc)) return fail(IBEX_ERR_INVALID_ARGUMENT, "ibex_poll_cq: max %d with wc %p", max, (void *)wc);
    return IBEX_DISPATCH(cq->context->ops, poll_cq, cq, max, wc, count);
}

ibex_status_t ibex_cq_fd(ibex_cq_t *cq, int *fd) {
    IBEX_CHECK_NULL(cq, "cq");
    IBEX_CHECK_NULL(fd, "fd");
    return IBEX_DISPATCH(cq->context->ops, cq_fd, cq, fd);
}

ibex_status_t ibex_req_notify_cq(ibex_cq_t *cq) {
    IBEX_CHECK_NULL(cq, "cq");
    return IBEX_DISPATCH(cq->context->ops, req_notify_cq, cq);
}

ibex_status_t ibex_cq_wait(ibex_cq_t *cq, int timeout_ms) {
    IBEX_CHECK_NULL(cq, "cq");
    return IBEX_DISPATCH(cq->context->ops, cq_wait, cq, timeout_ms);
}

int ibex_mtu_to_bytes(ibex_mtu_t mtu) { return (mtu >= IBEX_MTU_256 && mtu <= IBEX_MTU_4096) ? (128 << mtu) : 0; }

ibex_status_t ibex_create_qp(ibex_pd_t *pd, const ibex_qp_init_attr_t *attr, ibex_qp_t **qp) {
    IBEX_CHECK_NULL(pd, "pd");
    IBEX_CHECK_NULL(attr, "attr");
    IBEX_CHECK_NULL(qp, "qp");
    ibex_status_t st;
    if (!attr_ok(attr, IBEX_MAGIC_QP_INIT_ATTR, "ibex_qp_init_attr_t", &st)) return st;
    ibex_qp_init_attr_t a = IBEX_QP_INIT_ATTR_INIT;
    a = widen(attr, a);
    if (!a.send_cq || !a.recv_cq) return fail(IBEX_ERR_INVALID_ARGUMENT, "ibex_create_qp: send_cq and recv_cq are required");
    if (a.send_cq->context != pd->context || a.recv_cq->context != pd->context)
        return fail(IBEX_ERR_INVALID_ARGUMENT, "ibex_create_qp: CQs and PD belong to different contexts");
    IBEX_TRY(IBEX_DISPATCH(pd->context->ops, create_qp, pd, &a, qp));
    (*qp)->ops = pd->context->ops;
    return IBEX_OK;
}

ibex_status_t ibex_destroy_qp(ibex_qp_t *qp) {
    IBEX_CHECK_NULL(qp, "qp");
    return IBEX_DISPATCH(qp->pd->context->ops, destroy_qp, qp);
}

ibex_status_t ibex_modify_qp(ibex_qp_t *qp, const ibex_qp_attr_t *attr, unsigned attr_mask) {
    IBEX_CHECK_NULL(qp, "qp");
    IBEX_CHECK_NULL(attr, "attr");
    ibex_status_t st;
    if (!attr_ok(attr, IBEX_MAGIC_QP_ATTR, "ibex_qp_attr_t", &st)) return st;
    if (attr_mask & ~((IBEX_QP_SL << 1) - 1))
        return fail(IBEX_ERR_INVALID_ARGUMENT, "ibex_modify_qp: unknown attr_mask bits 0x%x", attr_mask);
    ibex_qp_attr_t a = IBEX_QP_ATTR_INIT;
    a = widen(attr, a);
    return IBEX_DISPATCH(qp->pd->context->ops, modify_qp, qp, &a, attr_mask);
}

ibex_status_t ibex_query_qp(ibex_qp_t *qp, ibex_qp_attr_t *attr) {
    IBEX_CHECK_NULL(qp, "qp");
    IBEX_CHECK_NULL(attr, "attr");
    ibex_status_t st;
    if (!attr_ok(attr, IBEX_MAGIC_QP_ATTR, "ibex_qp_attr_t", &st)) return st;
    ibex_qp_attr_t a = IBEX_QP_ATTR_INIT;
    st = IBEX_DISPATCH(qp->pd->context->ops, query_qp, qp, &a);
    if (st == IBEX_OK) {
        const uint32_t size = attr->size;
        std::memcpy(attr, &a, size);
        attr->size = size;
    }
    return st;
}

uint32_t ibex_qp_num(const ibex_qp_t *qp) { return qp ? qp->qp_num : 0; }

ibex_status_t ibex_qp_local_addr(ibex_qp_t *qp, ibex_ep_addr_t *addr) {
    IBEX_CHECK_NULL(qp, "qp");
    IBEX_CHECK_NULL(addr, "addr");
    return IBEX_DISPATCH(qp->pd->context->ops, qp_local_addr, qp, addr);
}

ibex_status_t ibex_qp_connect(ibex_qp_t *qp, const ibex_ep_addr_t *remote) {
    return ibex_qp_connect_attr(qp, remote, nullptr, 0);
}

ibex_status_t ibex_qp_connect_attr(ibex_qp_t *qp, const ibex_ep_addr_t *remote, const ibex_qp_attr_t *attr,
                                   unsigned attr_mask) {
    IBEX_CHECK_NULL(qp, "qp");
    IBEX_CHECK_NULL(remote, "remote");
    // Refused before the first step, so a bad value leaves the QP where it was.
    ibex::QpChoice choice;
    IBEX_TRY(ibex::qp_connect_choice(attr, attr_mask, "ibex_qp_connect_attr", &choice));
    ibex_qp_attr_t &a = choice.attr;
    ibex_ep_addr_t local;
    IBEX_TRY(ibex_qp_local_addr(qp, &local));
    if (!(attr_mask & IBEX_QP_ACCESS_FLAGS))
        a.qp_access_flags =
            IBEX_ACCESS_LOCAL_WRITE | IBEX_ACCESS_REMOTE_WRITE | IBEX_ACCESS_REMOTE_READ | IBEX_ACCESS_REMOTE_ATOMIC;
    a.qp_state = IBEX_QPS_INIT;
    IBEX_TRY(ibex_modify_qp(qp, &a, IBEX_QP_STATE | IBEX_QP_ACCESS_FLAGS));
    a.qp_state = IBEX_QPS_RTR;
    a.dest = *remote;
    const uint8_t both = remote->mtu && remote->mtu < local.mtu ? remote->mtu : local.mtu;
    // A chosen MTU above what both carry is lowered; one that is no IB MTU is refused below.
    if (!(attr_mask & IBEX_QP_PATH_MTU) || (a.path_mtu > both && a.path_mtu <= IBEX_MTU_4096))
        a.path_mtu = static_cast<ibex_mtu_t>(both);
    a.rq_psn = remote->psn;
    IBEX_TRY(ibex_modify_qp(qp, &a,
                            IBEX_QP_STATE | IBEX_QP_DEST | IBEX_QP_PATH_MTU | IBEX_QP_RQ_PSN |
                                (attr_mask & (IBEX_QP_MAX_RD_ATOMIC | IBEX_QP_MIN_RNR_TIMER | IBEX_QP_TRAFFIC_CLASS |
                                         IBEX_QP_SL))));
    a.qp_state = IBEX_QPS_RTS;
    a.sq_psn = local.psn;
    if (!(attr_mask & IBEX_QP_TIMEOUT)) a.timeout = ibex::kQpDefaultTimeout;
    if (!(attr_mask & IBEX_QP_RETRY_CNT)) a.retry_cnt = ibex::kQpDefaultRetryCnt;
    if (!(attr_mask & IBEX_QP_RNR_RETRY)) a.rnr_retry = ibex::kQpDefaultRnrRetry;
    return ibex_modify_qp(qp, &a,
                          IBEX_QP_STATE | IBEX_QP_SQ_PSN | IBEX_QP_TIMEOUT | IBEX_QP_RETRY_CNT | IBEX_QP_RNR_RETRY |
                              (attr_mask & IBEX_QP_MAX_RD_ATOMIC));
}

ibex_status_t ibex_post_send(ibex_qp_t *qp, ibex_send_wr_t *wr, ibex_send_wr_t **bad_wr) {
    IBEX_CHECK_NULL(qp, "qp");
    if (bad_wr) *bad_wr = wr;
    IBEX_CHECK_NULL(wr, "wr");
    return IBEX_DISPATCH(qp_ops(qp), post_send, qp, wr, bad_wr);
}

ibex_status_t ibex_post_recv(ibex_qp_t *qp, ibex_recv_wr_t *wr, ibex_recv_wr_t **bad_wr) {
    IBEX_CHECK_NULL(qp, "qp");
    if (bad_wr) *bad_wr = wr;
    IBEX_CHECK_NULL(wr, "wr");
    return IBEX_DISPATCH(qp_ops(qp), post_recv, qp, wr, bad_wr);
}

// ---- per-QP queries (DCQCN, loss recovery)

ibex_status_t ibex_query_qp_cc(ibex_qp_t *qp, ibex_qp_cc_t *cc) {
    IBEX_TRY(check_qp_query(__func__, qp, cc, "cc", "ibex_qp_cc_t"));
    return IBEX_DISPATCH(qp->pd->context->ops, query_qp_cc, qp, cc);
}

ibex_status_t ibex_query_qp_retransmit(ibex_qp_t *qp, ibex_qp_retransmit_t *rt) {
    IBEX_TRY(check_qp_query(__func__, qp, rt, "rt", "ibex_qp_retransmit_t"));
    return IBEX_DISPATCH(qp->pd->context->ops, query_qp_retransmit, qp, rt);
}

} // extern "C"

namespace ibex {

ibex_status_t qp_connect_choice(const ibex_qp_attr_t *attr, unsigned mask, const char *who, QpChoice *out) {
    *out = QpChoice{};
    if (mask & ~kQpConnectChoosable)
        return fail(IBEX_ERR_INVALID_ARGUMENT,
                    "%s: attr_mask 0x%x names what the addresses decide (state, peer, PSNs) or unknown bits", who,
                    mask & ~kQpConnectChoosable);
    if (!mask) return IBEX_OK;
    if (!attr) return fail(IBEX_ERR_INVALID_ARGUMENT, "%s: attr is NULL but attr_mask is 0x%x", who, mask);
    ibex_status_t st;
    if (!attr_ok(attr, IBEX_MAGIC_QP_ATTR, "ibex_qp_attr_t", &st)) return st;
    const ibex_qp_attr_t a = widen(attr, out->attr);
    if (ibex_status_t bad = check_qp_attr_values(a, mask); bad != IBEX_OK)
        return fail(bad, "%s: %s", who, ibex_last_error());
    out->attr = a;
    out->mask = mask;
    return IBEX_OK;
}

const char *qp_choice_text(const QpChoice &choice, char *buf, size_t len) {
    const ibex_qp_attr_t &a = choice.attr;
    struct Item {
        unsigned bit;
        const char *name;
        unsigned value;
    };
    const Item items[] = {{IBEX_QP_TRAFFIC_CLASS, "traffic class", a.traffic_class},
                          {IBEX_QP_SL, "sl", a.sl},
                          {IBEX_QP_PATH_MTU, "path MTU", static_cast<unsigned>(ibex_mtu_to_bytes(a.path_mtu))},
                          {IBEX_QP_TIMEOUT, "timeout", a.timeout},
                          {IBEX_QP_RETRY_CNT, "retry_cnt", a.retry_cnt},
                          {IBEX_QP_RNR_RETRY, "rnr_retry", a.rnr_retry},
                          {IBEX_QP_MIN_RNR_TIMER, "min_rnr_timer", a.min_rnr_timer},
                          {IBEX_QP_MAX_RD_ATOMIC, "max_rd_atomic", a.max_rd_atomic},
                          {IBEX_QP_ACCESS_FLAGS, "access flags 0x", a.qp_access_flags}};
    size_t used = 0;
    std::snprintf(buf, len, "defaults");
    for (const Item &it : items) {
        if (!(choice.mask & it.bit)) continue;
        const bool hex = it.bit == IBEX_QP_ACCESS_FLAGS;
        const int n = std::snprintf(buf + used, len - used, hex ? "%s%s%x" : "%s%s %u", used ? ", " : "", it.name,
                                    it.value);
        if (n < 0 || size_t(n) >= len - used) {
            buf[used] = '\0'; // whole items only
            break;
        }
        used += size_t(n);
    }
    return buf;
}

} // namespace ibex
