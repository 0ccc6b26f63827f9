// The verbs provider's ops table: ibex objects over libibverbs objects on a real RNIC.
// The hardware does RoCE v2, retransmission and DCQCN; this file translates (through the
// pure pieces: qp_attr, work_map, gid_select, gpu_reg) and owns the objects' lifetime.
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <mutex>
#include <poll.h>
#include <random>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "runtime/base/cuda_memory.h"
#include "runtime/base/log.h"
#include "runtime/base/status.h"
#include "transport/provider.h"
#include "transport/verbs/gid_select.h"
#include "transport/verbs/gpu_reg.h"
#include "transport/verbs/qp_attr.h"
#include "transport/verbs/sysfs.h"
#include "transport/verbs/work_map.h"

namespace ibex::verbs {
namespace {

using Lock = std::lock_guard<std::mutex>;

constexpr int kPollBatch = 32;     // completions taken per ibv_poll_cq call
constexpr int kBacklog = 64;       // completions req_notify/cq_wait may take ahead
constexpr uint32_t kInline = 64;   // inline bytes asked for (0 if the device refuses)
constexpr uint16_t kRoceUdpPort = 4791;

struct VerbsContext : ibex_context {
    ibv_context *ibv = nullptr;
    PortFacts port;
    uint8_t traffic_class = 0; // IBEX_TRAFFIC_CLASS default for new QPs
    ibv_gid gid{};
    bool peermem = false;
    GpuRegMode gpu_mode = GpuRegMode::kAuto;
    std::mutex mutex;
    int live = 0; // PDs and CQs
};

struct VerbsPd : ibex_pd {
    VerbsContext *vctx = nullptr;
    ibv_pd *ibv = nullptr;
    int users = 0; // MRs and QPs, under vctx->mutex
};

struct VerbsMr : ibex_mr {
    ibv_mr *ibv = nullptr;
    RegPath path = RegPath::kHost;
};

struct VerbsCq : ibex_cq {
    VerbsContext *vctx = nullptr;
    ibv_cq *ibv = nullptr;
    ibv_comp_channel *channel = nullptr;
    int event_fd = -1; // readable when the backlog holds completions
    int epoll_fd = -1; // what ibex_cq_fd hands out: channel fd + event_fd
    std::mutex mutex;  // the backlog
    ibex_wc_t backlog[kBacklog];
    int backlog_head = 0;
    int backlog_count = 0;
    int users = 0;
};

struct VerbsQp : ibex_qp {
    VerbsContext *vctx = nullptr;
    ibv_qp *ibv = nullptr;
    std::mutex mutex;
    QpMemory mem;
};

VerbsContext *vctx_of(ibex_context *c) { return static_cast<VerbsContext *>(c); }
VerbsPd *pd_of(ibex_pd *p) { return static_cast<VerbsPd *>(p); }
VerbsCq *cq_of(ibex_cq *c) { return static_cast<VerbsCq *>(c); }
VerbsQp *qp_of(ibex_qp *q) { return static_cast<VerbsQp *>(q); }

// Kernel driver names the RDMA core gives devices. A name of this shape is served here
// even when absent, so opening it says "no such RDMA device" rather than "no provider".
bool looks_like_rdma_device(const std::string &name) {
    static const char *prefixes[] = {"mlx4_", "mlx5_", "rxe", "siw", "irdma", "bnxt_re", "efa_",  "qedr",
                                     "hns_",  "erdma", "ionic", "mana_", "cxgb4_", "ocrdma", "vmw_pvrdma", "hfi1_"};
    for (const char *p : prefixes)
        if (name.rfind(p, 0) == 0) return true;
    return false;
}

// "mlx5_0" or "mlx5_0:2" (port 2). False for a malformed port suffix.
bool split_name(const char *device, std::string *base, int *port) {
    std::string s(device);
    *port = 0;
    const size_t colon = s.find(':');
    if (colon == std::string::npos) {
        *base = s;
        return !s.empty();
    }
    *base = s.substr(0, colon);
    const std::string p = s.substr(colon + 1);
    if (base->empty() || p.empty() || p.size() > 3 || p.find_first_not_of("0123456789") != std::string::npos) return false;
    *port = std::atoi(p.c_str());
    return *port > 0;
}

// The names ibv_get_device_list returns; *err receives its errno when it fails.
std::vector<std::string> ibv_names(int *err) {
    std::vector<std::string> names;
    int n = 0;
    errno = 0;
    ibv_device **list = ibv_get_device_list(&n);
    *err = list ? 0 : errno;
    if (!list) return names;
    for (int i = 0; i < n; ++i) names.emplace_back(ibv_get_device_name(list[i]));
    ibv_free_device_list(list);
    return names;
}

void list_devices(std::vector<DeviceEntry> &out) {
    int err = 0;
    const std::vector<std::string> names = ibv_names(&err);
    if (names.empty()) {
        static std::once_flag once;
        std::call_once(once, [err] {
            IBEX_LOG(debug, "verbs: no RDMA devices%s%s", err ? " (ibv_get_device_list: " : "",
                     err ? (std::string(strerror(err)) + ")").c_str() : "");
        });
    }
    for (const auto &n : names) out.push_back({n, "verbs"});
}

bool claims(const char *device) {
    std::string base;
    int port;
    if (!split_name(device, &base, &port)) return false;
    if (looks_like_rdma_device(base)) return true;
    int err;
    for (const auto &n : ibv_names(&err))
        if (n == base) return true;
    return false;
}

uint8_t env_u8(const char *name, uint8_t dflt, uint8_t max) {
    const char *s = std::getenv(name);
    if (!s || !*s) return dflt;
    char *end = nullptr;
    const long v = std::strtol(s, &end, 0);
    if (*end || v < 0 || v > max) {
        IBEX_LOG(warn, "%s=\"%s\" is not in 0..%u: using %u", name, s, max, dflt);
        return dflt;
    }
    return static_cast<uint8_t>(v);
}

const char *port_state_name(ibv_port_state s) { return ibv_port_state_str(s); }

ibex_status_t open_device(const char *device, const ibex_context_attr_t *attr, ibex_context **out) {
    std::string base;
    int want_port = 0;
    if (!split_name(device, &base, &want_port))
        return fail(IBEX_ERR_INVALID_ARGUMENT, "\"%s\": expected an RDMA device name, optionally with :<port>", device);
    int n = 0;
    errno = 0;
    ibv_device **list = ibv_get_device_list(&n);
    const int list_err = list ? 0 : errno;
    ibv_device *dev = nullptr;
    std::string known;
    for (int i = 0; list && i < n; ++i) {
        known += std::string(known.empty() ? "" : ", ") + ibv_get_device_name(list[i]);
        if (base == ibv_get_device_name(list[i])) dev = list[i];
    }
    if (!dev) {
        if (list) ibv_free_device_list(list);
        if (known.empty())
            return fail(IBEX_ERR_NO_DEVICE,
                        "RDMA device \"%s\" not found: this host has no RDMA devices (%s%s; is the NIC's RDMA driver loaded? "
                        "/sys/class/infiniband lists them)",
                        base.c_str(), list_err ? "ibv_get_device_list: " : "none listed",
                        list_err ? strerror(list_err) : "");
        return fail(IBEX_ERR_NO_DEVICE, "RDMA device \"%s\" not found (present: %s)", base.c_str(), known.c_str());
    }
    ibv_context *ibv = ibv_open_device(dev);
    const int open_err = errno;
    ibv_free_device_list(list);
    if (!ibv) return fail_errno(status_from_errno(open_err), open_err, "ibv_open_device(%s)", base.c_str());

    auto bail = [&](ibex_status_t st) {
        ibv_close_device(ibv);
        return st;
    };
    ibv_device_attr dattr{};
    if (int e = ibv_query_device(ibv, &dattr)) return bail(fail_errno(status_from_errno(e), e, "ibv_query_device(%s)", base.c_str()));
    int port = want_port;
    ibv_port_attr pattr{};
    if (port) {
        if (port > dattr.phys_port_cnt)
            return bail(fail(IBEX_ERR_NO_DEVICE, "%s has %u port(s); port %d asked for", base.c_str(), dattr.phys_port_cnt, port));
        if (int e = ibv_query_port(ibv, static_cast<uint8_t>(port), &pattr))
            return bail(fail_errno(status_from_errno(e), e, "ibv_query_port(%s, %d)", base.c_str(), port));
    } else {
        for (int p = 1; p <= dattr.phys_port_cnt; ++p) {
            ibv_port_attr a{};
            if (ibv_query_port(ibv, static_cast<uint8_t>(p), &a) == 0 && a.state == IBV_PORT_ACTIVE) {
                port = p;
                pattr = a;
                break;
            }
        }
        if (!port) return bail(fail(IBEX_ERR_INVALID_STATE, "%s: no ACTIVE port (link down?)", base.c_str()));
    }
    if (pattr.state != IBV_PORT_ACTIVE)
        return bail(fail(IBEX_ERR_INVALID_STATE, "%s port %d is %s, not ACTIVE", base.c_str(), port, port_state_name(pattr.state)));
    if (pattr.link_layer != IBV_LINK_LAYER_ETHERNET)
        return bail(fail(IBEX_ERR_NOT_SUPPORTED, "%s port %d is InfiniBand: ibex drives RoCE v2 ports only", base.c_str(), port));

    GidPolicy policy;
    std::string err;
    if (!GidPolicy::from_env(&policy, &err)) return bail(fail(IBEX_ERR_INVALID_ARGUMENT, "%s", err.c_str()));
    if (attr && attr->local_addr && *attr->local_addr && !policy.set_address(attr->local_addr))
        return bail(fail(IBEX_ERR_INVALID_ARGUMENT, "local_addr \"%s\" is not an IPv4 or IPv6 address", attr->local_addr));
    ibex::RootFs root("/");
    DeviceSysfs sysfs(root, base);
    PortInfo info;
    if (!sysfs.read_port(port, &info, &err)) return bail(fail(IBEX_ERR_SYSTEM, "%s", err.c_str()));
    const GidChoice gid = select_gid(info, policy);
    if (gid.index < 0) return bail(fail(IBEX_ERR_INVALID_STATE, "%s: %s", base.c_str(), gid.reason.c_str()));

    auto *ctx = new (std::nothrow) VerbsContext;
    if (!ctx) return bail(fail(IBEX_ERR_NO_MEMORY, "cannot allocate a context"));
    ctx->ops = &kVerbsProviderOps;
    ctx->device_name = base + ":" + std::to_string(port);
    ctx->ibv = ibv;
    ctx->port.port_num = static_cast<uint8_t>(port);
    ctx->port.gid_index = gid.index;
    ctx->port.active_mtu = pattr.active_mtu;
    ctx->port.max_rd_atomic = static_cast<uint8_t>(std::min(dattr.max_qp_init_rd_atom, 16));
    ctx->port.max_dest_rd_atomic = static_cast<uint8_t>(std::min(dattr.max_qp_rd_atom, 16));
    ctx->port.sl = env_u8("IBEX_SL", 0, 7);
    ctx->traffic_class = env_u8("IBEX_TRAFFIC_CLASS", 0, 255);
    if (ibv_query_gid(ibv, static_cast<uint8_t>(port), gid.index, &ctx->gid) != 0) std::memcpy(ctx->gid.raw, gid.entry.gid, 16);
    ctx->peermem = peermem_loaded(root);
    if (!gpu_reg_mode_from_env(&ctx->gpu_mode, &err)) {
        delete ctx;
        return bail(fail(IBEX_ERR_INVALID_ARGUMENT, "%s", err.c_str()));
    }
    IBEX_LOG(info, "%s: port %d, %s, active MTU %d", ctx->device_name.c_str(), port, gid.reason.c_str(), 128 << pattr.active_mtu);
    *out = ctx;
    return IBEX_OK;
}

ibex_status_t close_device(ibex_context *c) {
    VerbsContext *ctx = vctx_of(c);
    {
        Lock l(ctx->mutex);
        if (ctx->live) return fail(IBEX_ERR_INVALID_STATE, "context still has %d PD(s)/CQ(s): destroy them first", ctx->live);
    }
    if (int e = ibv_close_device(ctx->ibv)) return fail_errno(status_from_errno(e), e, "ibv_close_device");
    delete ctx;
    return IBEX_OK;
}

ibex_status_t query_counters(ibex_context *c, ibex_counters_t *out) {
    VerbsContext *ctx = vctx_of(c);
    ibex::RootFs root("/");
    const std::string name = ctx->device_name.substr(0, ctx->device_name.find(':'));
    ibex_counters_t snap{};
    snap.size = sizeof snap;
    DeviceSysfs(root, name).read_counters(ctx->port.port_num, &snap);
    const uint32_t size = out->size;
    std::memcpy(out, &snap, std::min<size_t>(size, sizeof snap));
    out->size = size;
    return IBEX_OK;
}

// The RNIC progresses by itself; the call exists so portable callers need no branch.
ibex_status_t progress(ibex_context *) { return IBEX_OK; }

ibex_status_t alloc_pd(ibex_context *c, ibex_pd **out) {
    VerbsContext *ctx = vctx_of(c);
    ibv_pd *ibv = ibv_alloc_pd(ctx->ibv);
    if (!ibv) return fail_errno(IBEX_ERR_NO_MEMORY, errno, "ibv_alloc_pd");
    auto *pd = new (std::nothrow) VerbsPd;
    if (!pd) {
        ibv_dealloc_pd(ibv);
        return fail(IBEX_ERR_NO_MEMORY, "cannot allocate a protection domain");
    }
    pd->context = c;
    pd->vctx = ctx;
    pd->ibv = ibv;
    Lock l(ctx->mutex);
    ++ctx->live;
    *out = pd;
    return IBEX_OK;
}

ibex_status_t dealloc_pd(ibex_pd *p) {
    VerbsPd *pd = pd_of(p);
    {
        Lock l(pd->vctx->mutex);
        if (pd->users) return fail(IBEX_ERR_INVALID_STATE, "PD still has %d MR(s)/QP(s)", pd->users);
    }
    if (int e = ibv_dealloc_pd(pd->ibv)) return fail_errno(status_from_errno(e), e, "ibv_dealloc_pd");
    {
        Lock l(pd->vctx->mutex);
        --pd->vctx->live;
    }
    delete pd;
    return IBEX_OK;
}

// Registers device memory along the planned paths; the first that works wins.
ibv_mr *reg_device_mr(VerbsPd *pd, void *addr, size_t length, int access, RegPath *used, std::string *tried) {
    GpuRegFacts facts;
    facts.device_memory = true;
    facts.cuda_dmabuf = cuda::dmabuf_supported(cuda::pointer_device(addr));
    facts.peermem = pd->vctx->peermem;
    facts.mode = pd->vctx->gpu_mode;
    const RegPlan plan = plan_registration(facts);
    if (!plan.count) *tried = plan.why;
    const uint64_t va = reinterpret_cast<uintptr_t>(addr);
    for (int i = 0; i < plan.count; ++i) {
        ibv_mr *mr = nullptr;
        int e = 0;
        if (plan.paths[i] == RegPath::kDmabuf) {
            const DmabufRange r = dmabuf_range(va, length, static_cast<uint64_t>(sysconf(_SC_PAGESIZE)));
            int fd = -1;
            if (cuda::export_dmabuf(r.base, r.size, &fd) != IBEX_OK) {
                *tried += std::string(tried->empty() ? "" : "; ") + ibex_last_error();
                continue;
            }
            mr = ibv_reg_dmabuf_mr(pd->ibv, r.offset, length, va, fd, access);
            e = errno;
            close(fd); // the MR holds its own reference to the dma-buf
        } else {
            mr = ibv_reg_mr(pd->ibv, addr, length, access);
            e = errno;
        }
        if (mr) {
            *used = plan.paths[i];
            return mr;
        }
        *tried += std::string(tried->empty() ? "" : "; ") + reg_path_name(plan.paths[i]) + ": " + strerror(e);
    }
    return nullptr;
}

ibex_status_t reg_mr(ibex_pd *p, void *addr, size_t length, unsigned access, ibex_mr **out) {
    VerbsPd *pd = pd_of(p);
    const int flags = static_cast<int>(access);
    ibv_mr *ibv = nullptr;
    RegPath path = RegPath::kHost;
    if (cuda::is_device_pointer(addr)) {
        std::string tried;
        ibv = reg_device_mr(pd, addr, length, flags | IBV_ACCESS_RELAXED_ORDERING, &path, &tried);
        if (!ibv) return fail(IBEX_ERR_NOT_SUPPORTED, "cannot register GPU memory %p (+%zu): %s", addr, length, tried.c_str());
    } else {
        ibv = ibv_reg_mr(pd->ibv, addr, length, flags);
        if (!ibv) {
            const int e = errno;
            return fail_errno(status_from_errno(e), e, "ibv_reg_mr(%p, %zu)%s", addr, length,
                              e == ENOMEM ? " (is RLIMIT_MEMLOCK large enough? ulimit -l)" : "");
        }
    }
    auto *mr = new (std::nothrow) VerbsMr;
    if (!mr) {
        ibv_dereg_mr(ibv);
        return fail(IBEX_ERR_NO_MEMORY, "cannot allocate a memory region");
    }
    mr->pd = p;
    mr->addr = addr;
    mr->length = length;
    mr->lkey = ibv->lkey;
    mr->rkey = ibv->rkey;
    mr->access = access;
    mr->ibv = ibv;
    mr->path = path;
    Lock l(pd->vctx->mutex);
    ++pd->users;
    *out = mr;
    return IBEX_OK;
}

ibex_status_t dereg_mr(ibex_mr *m) {
    auto *mr = static_cast<VerbsMr *>(m);
    if (int e = ibv_dereg_mr(mr->ibv)) return fail_errno(status_from_errno(e), e, "ibv_dereg_mr");
    VerbsPd *pd = pd_of(mr->pd);
    {
        Lock l(pd->vctx->mutex);
        --pd->users;
    }
    delete mr;
    return IBEX_OK;
}

void destroy_cq_parts(VerbsCq *cq) {
    if (cq->ibv) ibv_destroy_cq(cq->ibv);
    if (cq->channel) ibv_destroy_comp_channel(cq->channel);
    if (cq->epoll_fd >= 0) close(cq->epoll_fd);
    if (cq->event_fd >= 0) close(cq->event_fd);
}

ibex_status_t create_cq(ibex_context *c, int cqe, ibex_cq **out) {
    VerbsContext *ctx = vctx_of(c);
    auto *cq = new (std::nothrow) VerbsCq;
    if (!cq) return fail(IBEX_ERR_NO_MEMORY, "cannot allocate a CQ");
    cq->context = c;
    cq->vctx = ctx;
    auto bail = [&](ibex_status_t st) {
        destroy_cq_parts(cq);
        delete cq;
        return st;
    };
    cq->channel = ibv_create_comp_channel(ctx->ibv);
    if (!cq->channel) return bail(fail_errno(IBEX_ERR_SYSTEM, errno, "ibv_create_comp_channel"));
    const int fl = fcntl(cq->channel->fd, F_GETFL);
    if (fl < 0 || fcntl(cq->channel->fd, F_SETFL, fl | O_NONBLOCK) < 0)
        return bail(fail_errno(IBEX_ERR_SYSTEM, errno, "O_NONBLOCK on the completion channel"));
    cq->ibv = ibv_create_cq(ctx->ibv, cqe, cq, cq->channel, 0);
    if (!cq->ibv) {
        const int e = errno;
        return bail(fail_errno(status_from_errno(e), e, "ibv_create_cq(%d entries)", cqe));
    }
    cq->cqe = cq->ibv->cqe;
    cq->event_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    cq->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
    if (cq->event_fd < 0 || cq->epoll_fd < 0) return bail(fail_errno(IBEX_ERR_SYSTEM, errno, "eventfd/epoll for a CQ"));
    for (int fd : {cq->channel->fd, cq->event_fd}) {
        epoll_event ev{};
        ev.events = EPOLLIN;
        ev.data.fd = fd;
        if (epoll_ctl(cq->epoll_fd, EPOLL_CTL_ADD, fd, &ev) != 0) return bail(fail_errno(IBEX_ERR_SYSTEM, errno, "epoll_ctl"));
    }
    {
        Lock l(ctx->mutex);
        ++ctx->live;
    }
    *out = cq;
    return IBEX_OK;
}

ibex_status_t destroy_cq(ibex_cq *c) {
    VerbsCq *cq = cq_of(c);
    {
        Lock l(cq->vctx->mutex);
        if (cq->users) return fail(IBEX_ERR_INVALID_STATE, "CQ is still used by %d QP(s)", cq->users);
        --cq->vctx->live;
    }
    destroy_cq_parts(cq);
    delete cq;
    return IBEX_OK;
}

// Moves up to `max` hardware completions into wc; returns how many, or -1 on error.
int poll_hw(VerbsCq *cq, int max, ibex_wc_t *wc) {
    ibv_wc hw[kPollBatch];
    int total = 0;
    while (total < max) {
        const int n = ibv_poll_cq(cq->ibv, std::min(max - total, kPollBatch), hw);
        if (n < 0) return total ? total : -1;
        for (int i = 0; i < n; ++i) convert_wc(hw[i], &wc[total + i]);
        total += n;
        if (n < std::min(max - total + n, kPollBatch)) break;
    }
    return total;
}

// Fills the backlog from the hardware CQ; with the backlog lock held.
void refill_backlog(VerbsCq *cq) {
    while (cq->backlog_count < kBacklog) {
        const int tail = (cq->backlog_head + cq->backlog_count) % kBacklog;
        const int room = std::min(kBacklog - cq->backlog_count, kBacklog - tail);
        const int n = poll_hw(cq, room, &cq->backlog[tail]);
        if (n <= 0) return;
        cq->backlog_count += n;
        if (n < room) return;
    }
}

// Takes the completion events the channel holds (non-blocking) and acknowledges them.
void drain_events(VerbsCq *cq) {
    ibv_cq *ev_cq;
    void *ev_ctx;
    for (int i = 0; i < 1024 && ibv_get_cq_event(cq->channel, &ev_cq, &ev_ctx) == 0; ++i) ibv_ack_cq_events(ev_cq, 1);
    uint64_t v;
    [[maybe_unused]] ssize_t r = read(cq->event_fd, &v, sizeof v);
}

ibex_status_t poll_cq(ibex_cq *c, int max, ibex_wc_t *wc, int *count) {
    VerbsCq *cq = cq_of(c);
    int n = 0;
    {
        Lock l(cq->mutex);
        while (n < max && cq->backlog_count) {
            wc[n++] = cq->backlog[cq->backlog_head];
            cq->backlog_head = (cq->backlog_head + 1) % kBacklog;
            --cq->backlog_count;
        }
    }
    if (n < max) {
        const int m = poll_hw(cq, max - n, wc + n);
        if (m < 0 && !n) return fail(IBEX_ERR_SYSTEM, "ibv_poll_cq failed");
        if (m > 0) n += m;
    }
    *count = n;
    return IBEX_OK;
}

ibex_status_t cq_fd(ibex_cq *c, int *fd) {
    *fd = cq_of(c)->epoll_fd;
    return IBEX_OK;
}

// Arms the CQ; completions already queued (which the hardware will not signal again)
// are taken into the backlog and make the fd readable at once, as on the soft provider.
ibex_status_t arm(VerbsCq *cq) {
    drain_events(cq);
    if (int e = ibv_req_notify_cq(cq->ibv, 0)) return fail_errno(status_from_errno(e), e, "ibv_req_notify_cq");
    refill_backlog(cq);
    if (cq->backlog_count) {
        uint64_t one = 1;
        [[maybe_unused]] ssize_t r = write(cq->event_fd, &one, sizeof one);
    }
    return IBEX_OK;
}

ibex_status_t req_notify_cq(ibex_cq *c) {
    VerbsCq *cq = cq_of(c);
    Lock l(cq->mutex);
    return arm(cq);
}

ibex_status_t cq_wait(ibex_cq *c, int timeout_ms) {
    VerbsCq *cq = cq_of(c);
    const auto start = std::chrono::steady_clock::now();
    for (;;) {
        {
            Lock l(cq->mutex);
            refill_backlog(cq);
            if (cq->backlog_count) return IBEX_OK;
            IBEX_TRY(arm(cq));
            if (cq->backlog_count) {
                drain_events(cq);
                return IBEX_OK;
            }
        }
        // Slices of at most 100 ms bound the wait even if an event goes astray.
        int slice = 100;
        if (timeout_ms >= 0) {
            const auto spent = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
            const int64_t left = timeout_ms - spent.count();
            if (left <= 0) return fail(IBEX_ERR_TIMEOUT, "no completion within %d ms", timeout_ms);
            slice = static_cast<int>(std::min<int64_t>(slice, left));
        }
        pollfd p{cq->channel->fd, POLLIN, 0};
        const int r = poll(&p, 1, slice);
        if (r < 0 && errno != EINTR) return fail_errno(IBEX_ERR_SYSTEM, errno, "poll on the completion channel");
        if (r > 0) {
            Lock l(cq->mutex);
            drain_events(cq);
        }
    }
}

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

} // namespace
} // namespace ibex::verbs

namespace ibex {

const ProviderOps kVerbsProviderOps = {
    .name = "verbs",
    .list_devices = verbs::list_devices,
    .claims = verbs::claims,
    .open_device = verbs::open_device,
    .close_device = verbs::close_device,
    .set_faults = nullptr,
    .query_counters = verbs::query_counters,
    .progress = verbs::progress,
    .alloc_pd = verbs::alloc_pd,
    .dealloc_pd = verbs::dealloc_pd,
    .reg_mr = verbs::reg_mr,
    .dereg_mr = verbs::dereg_mr,
    .create_cq = verbs::create_cq,
    .destroy_cq = verbs::destroy_cq,
    .poll_cq = verbs::poll_cq,
    .cq_fd = verbs::cq_fd,
    .req_notify_cq = verbs::req_notify_cq,
    .cq_wait = verbs::cq_wait,
    .create_qp = verbs::create_qp,
    .destroy_qp = verbs::destroy_qp,
    .modify_qp = verbs::modify_qp,
    .query_qp = verbs::query_qp,
    .qp_local_addr = verbs::qp_local_addr,
    .post_send = verbs::post_send,
    .post_recv = verbs::post_recv,
};

} // namespace ibex
