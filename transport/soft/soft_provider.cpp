// The soft provider's ops table: verbs objects on top of the soft RC engine. Argument
// shapes (null handles, struct sizes) are checked by the runtime before these run; the
// checks here are the ones that need the engine's state.
#include <arpa/inet.h>
#include <cstring>
#include <ifaddrs.h>
#include <net/if.h>
#include <random>
#include <sched.h>
#include <sys/eventfd.h>
#include <poll.h>
#include <unistd.h>

#include "runtime/base/log.h"
#include "runtime/base/status.h"
#include "runtime/base/cpuset.h"
#include "transport/provider.h"
#include "transport/qp_state.h"
#include "transport/soft/codec/roce.h"
#include "transport/soft/engine/context.h"
#include "transport/soft/engine/qp_logic.h"
#include "transport/soft/engine/staging.h"
#include "transport/soft/dpdk/device_spec.h"
#include "transport/soft/dpdk/dpdk_port.h"
#include "transport/soft/udp/udp_port.h"

namespace ibex::soft {
namespace {

using Lock = std::lock_guard<std::mutex>;

constexpr uint32_t kMaxWr = 1 << 16;
constexpr uint64_t kMaxMessage = 1ull << 31;

SoftContext *ctx_of(ibex_pd *pd) { return static_cast<SoftPd *>(pd)->ctx; }
SoftQp *qp_of(ibex_qp *qp) { return static_cast<SoftQp *>(qp); }
SoftCq *cq_of(ibex_cq *cq) { return static_cast<SoftCq *>(cq); }

const char *state_name(ibex_qp_state_t s) { return qp_state_name(s); }

void list_devices(std::vector<DeviceEntry> &out) {
    out.push_back({"udp:lo", "soft"});
    ifaddrs *list = nullptr;
    if (getifaddrs(&list) != 0) return;
    for (ifaddrs *a = list; a; a = a->ifa_next) {
        if (!a->ifa_addr || a->ifa_addr->sa_family != AF_INET || (a->ifa_flags & IFF_LOOPBACK)) continue;
        std::string name = std::string("udp:") + a->ifa_name;
        bool dup = false;
        for (auto &e : out) dup |= e.name == name;
        if (!dup) out.push_back({name, "soft"});
    }
    freeifaddrs(list);
}

bool claims(const char *device) { return is_udp_device(device) || dpdk::is_dpdk_device(device); }

ibex_status_t open_device(const char *device, const ibex_context_attr_t *attr, ibex_context **out) {
    ibex_status_t st;
    std::unique_ptr<Port> port;
    if (dpdk::is_dpdk_device(device)) {
        DpdkPortOptions o;
        o.device = device;
        if (attr && attr->local_addr) o.local_addr = attr->local_addr;
        if (attr) o.port = attr->udp_port;
        port = open_dpdk_port(o, &st);
    } else {
        UdpPortOptions o;
        o.device = device;
        if (attr && attr->local_addr) o.local_addr = attr->local_addr;
        if (attr) o.port = attr->udp_port;
        port = open_udp_port(o, &st);
    }
    if (!port) return st;
    EngineConfig cfg = EngineConfig::from_env();
    if (attr && !attr->progress_thread) cfg.progress_thread = false;
    if (!rate_control_config(attr ? attr->dcqcn : nullptr, attr ? attr->dcqcn_line_rate_mbps : 0, cfg.rate, &st))
        return st;
    if (attr && attr->progress_cpus && *attr->progress_cpus) {
        ibex::CpuSet cpus;
        std::string err;
        if (!ibex::CpuSet::parse_list(attr->progress_cpus, cpus, err, CPU_SETSIZE) || cpus.empty())
            return fail(IBEX_ERR_INVALID_ARGUMENT, "progress CPUs \"%s\": %s", attr->progress_cpus,
                        err.empty() ? "empty list" : err.c_str());
        cfg.progress_cpus = cpus.cpus();
    }
    // What is in flight must fit the socket buffer that receives it: ibex sizes the peer's
    // like its own, so its own is the estimate. Without root (SO_RCVBUFFORCE) the buffer
    // is capped by net.core.rmem_max, often 208 KiB.
    if (const size_t rx = port->rx_buffer_bytes()) {
        const size_t per_packet = size_t(roce::mtu_bytes(port->max_mtu())) + 64;
        const uint32_t fits = static_cast<uint32_t>(std::max<size_t>(16, rx * 3 / 4 / per_packet));
        if (fits < cfg.max_inflight_context) {
            if (fits < 256)
                IBEX_LOG(warn, "%s: socket receive buffer is %zu KiB: at most %u packets in flight (raise net.core.rmem_max, or run as root)",
                         device, rx / 1024, fits);
            else
                IBEX_LOG(info, "%s: socket receive buffer %zu KiB: at most %u packets in flight", device, rx / 1024, fits);
            cfg.max_inflight_context = fits;
            cfg.max_inflight = std::min(cfg.max_inflight, fits);
        }
    }
    auto *ctx = new (std::nothrow) SoftContext(std::move(port), cfg);
    if (!ctx) return fail(IBEX_ERR_NO_MEMORY, "cannot allocate a context");
    ctx->ops = &kSoftProviderOps;
    ctx->device_name = device;
    ctx->start();
    *out = ctx;
    return IBEX_OK;
}

ibex_status_t close_device(ibex_context *c) {
    SoftContext *ctx = to_soft(c);
    {
        Lock l(ctx->mutex());
        if (ctx->live_objects())
            return fail(IBEX_ERR_INVALID_STATE, "context still has %d PD(s)/CQ(s): destroy them first", ctx->live_objects());
    }
    delete ctx;
    return IBEX_OK;
}

ibex_status_t set_faults(ibex_context *c, const ibex_fault_config_t *f) {
    if (f->loss < 0 || f->loss > 1 || f->reorder < 0 || f->reorder > 1 || f->duplicate < 0 || f->duplicate > 1 ||
        f->corrupt < 0 || f->corrupt > 1)
        return fail(IBEX_ERR_INVALID_ARGUMENT, "fault probabilities must lie in [0, 1]");
    SoftContext *ctx = to_soft(c);
    Lock l(ctx->mutex());
    ctx->faults().configure(*f);
    return IBEX_OK;
}

ibex_status_t query_counters(ibex_context *c, ibex_counters_t *out) {
    SoftContext *ctx = to_soft(c);
    Lock l(ctx->mutex());
    ibex_counters_t snap = ctx->counters();
    const size_t n = std::min<size_t>(out->size, sizeof snap);
    snap.size = out->size;
    std::memcpy(out, &snap, n);
    return IBEX_OK;
}

ibex_status_t progress(ibex_context *c) {
    SoftContext *ctx = to_soft(c);
    ctx->note_app_progress();
    Lock l(ctx->mutex());
    ctx->progress_once();
    return staging::active() ? staging::flush(*ctx) : IBEX_OK;
}

ibex_status_t alloc_pd(ibex_context *c, ibex_pd **out) {
    auto *pd = new (std::nothrow) SoftPd{};
    if (!pd) return fail(IBEX_ERR_NO_MEMORY, "cannot allocate a protection domain");
    pd->context = c;
    pd->ctx = to_soft(c);
    Lock l(pd->ctx->mutex());
    ++pd->ctx->live_objects();
    *out = pd;
    return IBEX_OK;
}

ibex_status_t dealloc_pd(ibex_pd *p) {
    auto *pd = static_cast<SoftPd *>(p);
    {
        Lock l(pd->ctx->mutex());
        if (pd->users) return fail(IBEX_ERR_INVALID_STATE, "PD still has %d MR(s)/QP(s)", pd->users);
        --pd->ctx->live_objects();
    }
    delete pd;
    return IBEX_OK;
}

ibex_status_t reg_mr(ibex_pd *pd, void *addr, size_t length, unsigned access, ibex_mr **out) {
    SoftContext *ctx = ctx_of(pd);
    auto *mr = new (std::nothrow) SoftMr{};
    if (!mr) return fail(IBEX_ERR_NO_MEMORY, "cannot allocate a memory region");
    mr->pd = pd;
    mr->addr = addr;
    mr->length = length;
    mr->access = access;
    if (ibex_status_t st = staging::attach(*ctx, *mr); st != IBEX_OK) {
        delete mr;
        return st;
    }
    Lock l(ctx->mutex());
    const uint32_t key = ctx->mrs().add(mr);
    if (!key) {
        staging::detach(*ctx, *mr);
        delete mr;
        return fail(IBEX_ERR_NO_MEMORY, "memory region table full");
    }
    mr->lkey = mr->rkey = key;
    ctx->port().memory_registered(mr->host ? mr->host : addr, length);
    ++static_cast<SoftPd *>(pd)->users;
    *out = mr;
    return IBEX_OK;
}

ibex_status_t dereg_mr(ibex_mr *mr) {
    SoftContext *ctx = ctx_of(mr->pd);
    {
        Lock l(ctx->mutex());
        ctx->mrs().remove(mr->lkey);
        auto *smr = static_cast<SoftMr *>(mr);
        ctx->port().memory_deregistered(smr->host ? smr->host : mr->addr, mr->length);
        staging::detach(*ctx, *smr);
        --static_cast<SoftPd *>(mr->pd)->users;
    }
    delete static_cast<SoftMr *>(mr);
    return IBEX_OK;
}

ibex_status_t create_cq(ibex_context *c, int cqe, ibex_cq **out) {
    auto *cq = new (std::nothrow) SoftCq(static_cast<size_t>(cqe));
    if (!cq) return fail(IBEX_ERR_NO_MEMORY, "cannot allocate a CQ of %d entries", cqe);
    cq->context = c;
    cq->cqe = cqe;
    cq->ctx = to_soft(c);
    cq->event_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (cq->event_fd < 0) {
        int e = errno;
        delete cq;
        return fail_errno(IBEX_ERR_SYSTEM, e, "eventfd for a CQ");
    }
    {
        Lock l(cq->ctx->mutex());
        ++cq->ctx->live_objects();
    }
    *out = cq;
    return IBEX_OK;
}

ibex_status_t destroy_cq(ibex_cq *c) {
    SoftCq *cq = cq_of(c);
    {
        Lock l(cq->ctx->mutex());
        if (cq->users) return fail(IBEX_ERR_INVALID_STATE, "CQ is still used by %d QP(s)", cq->users);
        --cq->ctx->live_objects();
    }
    close(cq->event_fd);
    delete cq;
    return IBEX_OK;
}

int take(SoftCq *cq, int max, ibex_wc_t *wc) {
    int n = 0;
    while (n < max && !cq->ring.empty()) {
        wc[n++] = cq->ring.front();
        cq->ring.pop();
    }
    return n;
}

ibex_status_t poll_cq(ibex_cq *c, int max, ibex_wc_t *wc, int *count) {
    SoftCq *cq = cq_of(c);
    SoftContext *ctx = cq->ctx;
    ctx->note_app_progress();
    Lock l(ctx->mutex());
    if (cq->ring.empty()) ctx->progress_once();
    // GPU memory: what completions report must be on the GPU before they are seen.
    if (staging::active())
        IBEX_TRY(staging::flush(*ctx));
    *count = take(cq, max, wc);
    return IBEX_OK;
}

ibex_status_t cq_fd(ibex_cq *c, int *fd) {
    *fd = cq_of(c)->event_fd;
    return IBEX_OK;
}

ibex_status_t req_notify_cq(ibex_cq *c) {
    SoftCq *cq = cq_of(c);
    Lock l(cq->ctx->mutex());
    cq->armed = true;
    if (!cq->ring.empty()) {
        cq->armed = false;
        uint64_t one = 1;
        [[maybe_unused]] ssize_t r = write(cq->event_fd, &one, sizeof one);
    }
    return IBEX_OK;
}

ibex_status_t cq_wait(ibex_cq *c, int timeout_ms) {
    SoftCq *cq = cq_of(c);
    SoftContext *ctx = cq->ctx;
    const uint64_t start = SoftContext::now_ns();
    for (;;) {
        {
            Lock l(ctx->mutex());
            if (!cq->ring.empty()) return IBEX_OK;
            if (!ctx->config().progress_thread) ctx->progress_once();
            if (!cq->ring.empty()) return IBEX_OK;
            cq->armed = true;
        }
        ctx->app_went_idle();
        int wait = ctx->config().progress_thread ? timeout_ms : 1;
        if (timeout_ms >= 0) {
            const int64_t left = timeout_ms - int64_t((SoftContext::now_ns() - start) / 1000000);
            if (left <= 0) return fail(IBEX_ERR_TIMEOUT, "no completion within %d ms", timeout_ms);
            wait = ctx->config().progress_thread ? static_cast<int>(left) : 1;
        }
        pollfd p{cq->event_fd, POLLIN, 0};
        if (poll(&p, 1, wait) > 0) {
            uint64_t v;
            [[maybe_unused]] ssize_t r = read(cq->event_fd, &v, sizeof v);
        }
    }
}

ibex_status_t create_qp(ibex_pd *pd, const ibex_qp_init_attr_t *a, ibex_qp **out) {
    SoftContext *ctx = ctx_of(pd);
    const uint32_t send_wr = a->max_send_wr ? a->max_send_wr : 1024;
    const uint32_t recv_wr = a->max_recv_wr ? a->max_recv_wr : 1024;
    if (send_wr > kMaxWr || recv_wr > kMaxWr)
        return fail(IBEX_ERR_INVALID_ARGUMENT, "max_send_wr/max_recv_wr above %u", kMaxWr);
    if (a->max_send_sge > kMaxSge || a->max_recv_sge > kMaxSge)
        return fail(IBEX_ERR_INVALID_ARGUMENT, "at most %d SGEs per work request", kMaxSge);
    if (cq_of(a->send_cq)->ctx != ctx || cq_of(a->recv_cq)->ctx != ctx)
        return fail(IBEX_ERR_INVALID_ARGUMENT, "the CQs belong to another context");
    auto *qp = new (std::nothrow) SoftQp(send_wr, recv_wr);
    if (!qp) return fail(IBEX_ERR_NO_MEMORY, "cannot allocate a QP");
    qp->pd = pd;
    qp->send_cq = a->send_cq;
    qp->recv_cq = a->recv_cq;
    qp->ctx = ctx;
    qp->scq = cq_of(a->send_cq);
    qp->rcq = cq_of(a->recv_cq);
    qp->sig_all = a->sq_sig_all != 0;
    qp->mtu_enum = ctx->port().max_mtu();
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

bool dest_from_gid(const ibex_ep_addr_t &ep, NetAddr *out) {
    static const uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    if (std::memcmp(ep.gid, prefix, sizeof prefix) != 0) return false;
    out->ip = roce::get32(ep.gid + 12);
    out->port = ep.udp_port ? ep.udp_port : roce::kUdpPort;
    return true;
}

void reset_qp(SoftQp &qp) {
    staging::forget_qp(*qp.ctx, qp);
    qp.sq = Ring<SendWqe>(qp.sq.capacity());
    qp.rq = Ring<RecvWqe>(qp.rq.capacity());
    qp.tx_pos = 0;
    qp.tx_pkt = 0;
    qp.rto_deadline = qp.rnr_until = 0;
    // Go-back-N and ACK bookkeeping of the old connection: a stale `rewound` makes the
    // new connection ignore its first sequence NAK and wait for the transport timeout.
    qp.rewound = false;
    qp.retry_left = qp.retry_cnt;
    qp.rnr_left = qp.rnr_retry;
    qp.unacked_rx = 0;
    qp.ack_psn = 0;
    qp.in_offset = 0;
    qp.in_write = nullptr;
    qp.in_write_len = 0;
    qp.job_count = qp.job_head = 0;
    qp.ack_pending = qp.nak_sent = false;
    qp.in_msg = SoftQp::InMsg::kNone;
    qp.msn = 0;
    for (auto &r : qp.replays) r.valid = false;
}

ibex_status_t modify_qp(ibex_qp *q, const ibex_qp_attr_t *a, unsigned mask) {
    SoftQp *qp = qp_of(q);
    SoftContext *ctx = qp->ctx;
    Lock l(ctx->mutex());
    const ibex_qp_state_t from = qp->state;
    const ibex_qp_state_t to = (mask & IBEX_QP_STATE) ? a->qp_state : from;
    if (!qp_transition_ok(from, to))
        return fail(IBEX_ERR_INVALID_STATE, "QP 0x%x: %s -> %s is not a valid transition", qp->qp_num,
                    state_name(from), state_name(to));
    if (mask & IBEX_QP_PATH_MTU) {
        if (a->path_mtu < IBEX_MTU_256 || a->path_mtu > IBEX_MTU_4096)
            return fail(IBEX_ERR_INVALID_ARGUMENT, "path_mtu %d is not an IB MTU (1..5)", a->path_mtu);
        if (a->path_mtu > ctx->port().max_mtu())
            return fail(IBEX_ERR_INVALID_ARGUMENT, "path MTU %d exceeds what the port carries (%d)",
                        roce::mtu_bytes(static_cast<uint8_t>(a->path_mtu)), roce::mtu_bytes(ctx->port().max_mtu()));
    }
    NetAddr dest;
    if ((mask & IBEX_QP_DEST) && !dest_from_gid(a->dest, &dest))
        return fail(IBEX_ERR_NOT_SUPPORTED, "the udp port reaches IPv4 peers only (GID must be ::ffff:a.b.c.d)");
    if (from == IBEX_QPS_INIT && to == IBEX_QPS_RTR && !(mask & IBEX_QP_DEST))
        return fail(IBEX_ERR_INVALID_ARGUMENT, "INIT -> RTR needs IBEX_QP_DEST (the peer's address)");
    if ((mask & IBEX_QP_RETRY_CNT) && a->retry_cnt > 7) return fail(IBEX_ERR_INVALID_ARGUMENT, "retry_cnt must be 0..7");
    if ((mask & IBEX_QP_RNR_RETRY) && a->rnr_retry > 7) return fail(IBEX_ERR_INVALID_ARGUMENT, "rnr_retry must be 0..7");
    if ((mask & IBEX_QP_TIMEOUT) && a->timeout > 31) return fail(IBEX_ERR_INVALID_ARGUMENT, "timeout must be 0..31");
    if ((mask & IBEX_QP_MIN_RNR_TIMER) && a->min_rnr_timer > 31)
        return fail(IBEX_ERR_INVALID_ARGUMENT, "min_rnr_timer must be 0..31");

    if (mask & IBEX_QP_ACCESS_FLAGS) qp->access = a->qp_access_flags;
    if (mask & IBEX_QP_PATH_MTU) {
        qp->mtu_enum = static_cast<uint8_t>(a->path_mtu);
        qp->mtu = static_cast<uint32_t>(roce::mtu_bytes(qp->mtu_enum));
    }
    if (mask & IBEX_QP_DEST) {
        qp->dest = dest;
        qp->dest_qpn = a->dest.qpn & roce::kQpnMask;
        ctx->port().peer_added(dest);
        if (!(mask & IBEX_QP_RQ_PSN)) qp->epsn = a->dest.psn & roce::kPsnMask;
        if (!(mask & IBEX_QP_PATH_MTU) && a->dest.mtu >= IBEX_MTU_256 && a->dest.mtu < qp->mtu_enum) {
            qp->mtu_enum = a->dest.mtu;
            qp->mtu = static_cast<uint32_t>(roce::mtu_bytes(qp->mtu_enum));
        }
    }
    if (mask & IBEX_QP_RQ_PSN) qp->epsn = a->rq_psn & roce::kPsnMask;
    if (mask & IBEX_QP_SQ_PSN) qp->sq_psn = a->sq_psn & roce::kPsnMask;
    if (mask & IBEX_QP_TIMEOUT) qp->timeout = a->timeout;
    // The live budgets follow a new limit at once (an RTS -> RTS change included).
    if (mask & IBEX_QP_RETRY_CNT) qp->retry_cnt = qp->retry_left = a->retry_cnt;
    if (mask & IBEX_QP_RNR_RETRY) qp->rnr_retry = qp->rnr_left = a->rnr_retry;
    if (mask & IBEX_QP_MIN_RNR_TIMER) qp->min_rnr_timer = a->min_rnr_timer;
    if (mask & IBEX_QP_MAX_RD_ATOMIC) qp->max_rd_atomic = a->max_rd_atomic;
    if (mask & IBEX_QP_TRAFFIC_CLASS) qp->traffic_class = a->traffic_class;

    if (to == IBEX_QPS_ERR) {
        qp_to_error(*qp);
        return IBEX_OK;
    }
    if (to == IBEX_QPS_RESET) reset_qp(*qp);
    if (to == IBEX_QPS_RTS && from == IBEX_QPS_RTR) {
        qp->una = qp->sent_high = qp->sq_psn;
        qp->cwnd = qp->cwnd_max = ctx->config().max_inflight;
        qp->retry_left = qp->retry_cnt;
        qp->rnr_left = qp->rnr_retry;
    }
    qp->state = to;
    return IBEX_OK;
}

ibex_status_t query_qp(ibex_qp *q, ibex_qp_attr_t *a) {
    SoftQp *qp = qp_of(q);
    Lock l(qp->ctx->mutex());
    a->qp_state = qp->state;
    a->qp_access_flags = qp->access;
    a->path_mtu = static_cast<ibex_mtu_t>(qp->mtu_enum);
    std::memset(&a->dest, 0, sizeof a->dest);
    a->dest.gid[10] = a->dest.gid[11] = 0xff;
    roce::put32(a->dest.gid + 12, qp->dest.ip);
    a->dest.udp_port = qp->dest.port;
    a->dest.qpn = qp->dest_qpn;
    a->dest.mtu = qp->mtu_enum;
    a->rq_psn = qp->epsn;
    a->sq_psn = qp->sq_psn;
    a->timeout = qp->timeout;
    a->retry_cnt = qp->retry_cnt;
    a->rnr_retry = qp->rnr_retry;
    a->min_rnr_timer = qp->min_rnr_timer;
    a->max_rd_atomic = qp->max_rd_atomic;
    a->traffic_class = qp->traffic_class;
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

// Resolves a WR's SGEs against the context's regions. `need` is the local right needed.
ibex_status_t resolve_sges(SoftContext &ctx, const ibex_sge_t *sg, int n, unsigned need, SgeList *out) {
    out->count = 0;
    out->total = 0;
    uint64_t total = 0;
    for (int i = 0; i < n; ++i) {
        if (!sg[i].length) continue;
        uint8_t *p = ctx.mrs().resolve(sg[i].lkey, sg[i].addr, sg[i].length, need);
        if (!p) {
            if (!ctx.mrs().find(sg[i].lkey))
                return fail(IBEX_ERR_INVALID_ARGUMENT, "sge %d: lkey 0x%x is not a registered memory region", i, sg[i].lkey);
            if (need && !ctx.mrs().resolve(sg[i].lkey, sg[i].addr, sg[i].length, 0))
                return fail(IBEX_ERR_INVALID_ARGUMENT, "sge %d: [0x%llx, +%u) lies outside memory region 0x%x", i,
                            static_cast<unsigned long long>(sg[i].addr), sg[i].length, sg[i].lkey);
            return fail(IBEX_ERR_INVALID_ARGUMENT, "sge %d: memory region 0x%x lacks IBEX_ACCESS_LOCAL_WRITE", i,
                        sg[i].lkey);
        }
        out->sge[out->count++] = {p, sg[i].length};
        total += sg[i].length;
    }
    if (total > kMaxMessage) return fail(IBEX_ERR_INVALID_ARGUMENT, "message of %llu bytes exceeds 2 GiB",
                                         static_cast<unsigned long long>(total));
    out->total = static_cast<uint32_t>(total);
    return IBEX_OK;
}

void flush_wr(SoftQp &qp, uint64_t wr_id, SoftCq *cq) {
    ibex_wc_t wc{};
    wc.wr_id = wr_id;
    wc.status = IBEX_WC_WR_FLUSH_ERR;
    wc.qp_num = qp.qp_num;
    cq->push(wc);
}

ibex_status_t post_one_send(SoftContext &ctx, SoftQp &qp, const ibex_send_wr_t &wr) {
    if (wr.opcode < IBEX_WR_RDMA_WRITE || wr.opcode > IBEX_WR_ATOMIC_FETCH_AND_ADD)
        return fail(IBEX_ERR_INVALID_ARGUMENT, "unknown work request opcode %d", wr.opcode);
    if (wr.num_sge < 0 || wr.num_sge > kMaxSge || (wr.num_sge && !wr.sg_list))
        return fail(IBEX_ERR_INVALID_ARGUMENT, "num_sge %d out of range (0..%d) or sg_list missing", wr.num_sge, kMaxSge);
    if (qp.state == IBEX_QPS_ERR) {
        flush_wr(qp, wr.wr_id, qp.scq);
        return IBEX_OK;
    }
    if (qp.state != IBEX_QPS_RTS)
        return fail(IBEX_ERR_INVALID_STATE, "QP 0x%x is in %s; post_send needs RTS", qp.qp_num, state_name(qp.state));
    if (qp.sq.full()) return fail(IBEX_ERR_QUEUE_FULL, "send queue of QP 0x%x is full (%zu)", qp.qp_num, qp.sq.capacity());
    SendWqe &w = qp.sq.at(qp.sq.tail());
    const bool atomic = wr.opcode == IBEX_WR_ATOMIC_CMP_AND_SWP || wr.opcode == IBEX_WR_ATOMIC_FETCH_AND_ADD;
    const bool read = wr.opcode == IBEX_WR_RDMA_READ;
    if ((wr.send_flags & IBEX_SEND_INLINE) && !read && !atomic) {
        if (staging::active())
            IBEX_TRY(staging::check_inline(wr));
        uint64_t total = 0;
        for (int i = 0; i < wr.num_sge; ++i) total += wr.sg_list[i].length;
        if (total > kMaxInline) return fail(IBEX_ERR_INVALID_ARGUMENT, "inline data of %llu bytes exceeds %u",
                                            static_cast<unsigned long long>(total), kMaxInline);
        uint32_t off = 0;
        for (int i = 0; i < wr.num_sge; ++i) {
            std::memcpy(w.inline_data + off, reinterpret_cast<const void *>(static_cast<uintptr_t>(wr.sg_list[i].addr)),
                        wr.sg_list[i].length);
            off += wr.sg_list[i].length;
        }
        w.local.count = off ? 1 : 0;
        w.local.sge[0] = {w.inline_data, off};
        w.local.total = off;
    } else {
        ibex_status_t st = resolve_sges(ctx, wr.sg_list, wr.num_sge, (read || atomic) ? IBEX_ACCESS_LOCAL_WRITE : 0, &w.local);
        if (st != IBEX_OK) return st;
    }
    if (atomic) {
        if (w.local.total != 8)
            return fail(IBEX_ERR_INVALID_ARGUMENT, "an atomic needs exactly 8 bytes of local buffer (got %u)", w.local.total);
        if (wr.wr.atomic.remote_addr & 7)
            return fail(IBEX_ERR_INVALID_ARGUMENT, "atomic remote address 0x%llx is not 8-byte aligned",
                        static_cast<unsigned long long>(wr.wr.atomic.remote_addr));
        w.remote_addr = wr.wr.atomic.remote_addr;
        w.rkey = wr.wr.atomic.rkey;
        w.compare_add = wr.wr.atomic.compare_add;
        w.swap = wr.wr.atomic.swap;
        w.npkts = 1;
    } else {
        w.remote_addr = wr.wr.rdma.remote_addr;
        w.rkey = wr.wr.rdma.rkey;
        w.npkts = std::max<uint32_t>(1, (w.local.total + qp.mtu - 1) / qp.mtu);
    }
    w.wr_id = wr.wr_id;
    w.opcode = static_cast<uint8_t>(wr.opcode);
    w.signaled = (wr.send_flags & IBEX_SEND_SIGNALED) != 0;
    w.solicited = (wr.send_flags & IBEX_SEND_SOLICITED) != 0;
    w.fence = (wr.send_flags & IBEX_SEND_FENCE) != 0;
    w.imm = wr.imm_data;
    if (staging::active())
        IBEX_TRY(staging::stage_send(ctx, qp, wr, qp.sq.tail()));
    w.first_psn = qp.sq_psn;
    qp.sq_psn = roce::psn_add(qp.sq_psn, w.npkts);
    qp.sq.push();
    return IBEX_OK;
}

ibex_status_t post_send(ibex_qp *q, ibex_send_wr_t *wr, ibex_send_wr_t **bad) {
    SoftQp *qp = qp_of(q);
    SoftContext *ctx = qp->ctx;
    Lock l(ctx->mutex());
    ibex_status_t st = IBEX_OK;
    for (; wr; wr = wr->next) {
        st = post_one_send(*ctx, *qp, *wr);
        if (st != IBEX_OK) break;
    }
    if (bad) *bad = wr;
    // GPU sources: their copies to the staging shadows finish before anything is sent.
    if (staging::active())
        if (ibex_status_t wst = staging::wait(); wst != IBEX_OK && st == IBEX_OK) st = wst;
    ctx->activate(qp);
    // Transmit now from the caller's thread: the lowest-latency path.
    ctx->service_qp(*qp, SoftContext::now_ns());
    ctx->flush_tx();
    return st;
}

ibex_status_t post_recv(ibex_qp *q, ibex_recv_wr_t *wr, ibex_recv_wr_t **bad) {
    SoftQp *qp = qp_of(q);
    SoftContext *ctx = qp->ctx;
    Lock l(ctx->mutex());
    ibex_status_t st = IBEX_OK;
    for (; wr; wr = wr->next) {
        if (qp->state == IBEX_QPS_RESET) {
            st = fail(IBEX_ERR_INVALID_STATE, "QP 0x%x is in RESET; post_recv needs INIT or later", qp->qp_num);
            break;
        }
        if (wr->num_sge < 0 || wr->num_sge > kMaxSge || (wr->num_sge && !wr->sg_list)) {
            st = fail(IBEX_ERR_INVALID_ARGUMENT, "num_sge %d out of range (0..%d) or sg_list missing", wr->num_sge, kMaxSge);
            break;
        }
        if (qp->state == IBEX_QPS_ERR) {
            flush_wr(*qp, wr->wr_id, qp->rcq);
            continue;
        }
        if (qp->rq.full()) {
            st = fail(IBEX_ERR_QUEUE_FULL, "receive queue of QP 0x%x is full (%zu)", qp->qp_num, qp->rq.capacity());
            break;
        }
        RecvWqe &r = qp->rq.at(qp->rq.tail());
        st = resolve_sges(*ctx, wr->sg_list, wr->num_sge, IBEX_ACCESS_LOCAL_WRITE, &r.local);
        if (st != IBEX_OK) break;
        if (staging::active()) staging::stage_recv(*ctx, *qp, *wr, qp->rq.tail());
        r.wr_id = wr->wr_id;
        qp->rq.push();
    }
    if (bad) *bad = wr;
    return st;
}

} // namespace
} // namespace ibex::soft

namespace ibex {

const ProviderOps kSoftProviderOps = {
    .name = "soft",
    .list_devices = soft::list_devices,
    .claims = soft::claims,
    .open_device = soft::open_device,
    .close_device = soft::close_device,
    .set_faults = soft::set_faults,
    .query_counters = soft::query_counters,
    .progress = soft::progress,
    .alloc_pd = soft::alloc_pd,
    .dealloc_pd = soft::dealloc_pd,
    .reg_mr = soft::reg_mr,
    .dereg_mr = soft::dereg_mr,
    .create_cq = soft::create_cq,
    .destroy_cq = soft::destroy_cq,
    .poll_cq = soft::poll_cq,
    .cq_fd = soft::cq_fd,
    .req_notify_cq = soft::req_notify_cq,
    .cq_wait = soft::cq_wait,
    .create_qp = soft::create_qp,
    .destroy_qp = soft::destroy_qp,
    .modify_qp = soft::modify_qp,
    .query_qp = soft::query_qp,
    .qp_local_addr = soft::qp_local_addr,
    .post_send = soft::post_send,
    .post_recv = soft::post_recv,
    .query_qp_cc = soft::query_qp_cc,
};

} // namespace ibex
