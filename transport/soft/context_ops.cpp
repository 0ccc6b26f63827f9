// Device discovery, opening a context on a udp or dpdk port, and the context-wide ops.
#include <cstdlib>
#include <arpa/inet.h>
#include <cstring>
#include <ifaddrs.h>
#include <net/if.h>
#include <sched.h>

#include "runtime/base/cpuset.h"
#include "runtime/base/log.h"
#include "runtime/base/status.h"
#include "transport/send_posting.h"
#include "transport/soft/codec/roce.h"
#include "transport/soft/dpdk/device_spec.h"
#include "transport/soft/dpdk/dpdk_port.h"
#include "transport/soft/engine/staging.h"
#include "transport/soft/soft_ops.h"
#include "transport/soft/udp/udp_port.h"

namespace ibex::soft::ops {

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
    if (const char *m = std::getenv("IBEX_RETRANSMIT"); m && *m && !parse_retransmit_mode(m, cfg.retransmit))
        return fail(IBEX_ERR_INVALID_ARGUMENT, "IBEX_RETRANSMIT=\"%s\": expected gbn or selective", m);
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
    cfg.fit_to_mtu(roce::mtu_bytes(port->max_mtu()));
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
    copy_counters(ctx->snapshot(), out);
    return IBEX_OK;
}

ibex_status_t query_device(ibex_context *c, ibex_device_attr_t *out) {
    SoftContext *ctx = to_soft(c);
    Lock l(ctx->mutex());
    out->max_msg_size = kMaxSoftMessage;
    out->max_mtu = ctx->port().max_mtu();
    out->efficient_msg_bytes = ctx->port().efficient_message_bytes();
    return IBEX_OK;
}

ibex_status_t progress(ibex_context *c) {
    SoftContext *ctx = to_soft(c);
    ctx->note_app_progress();
    Lock l(ctx->mutex());
    ctx->progress_once();
    return staging::active() ? staging::flush(*ctx) : IBEX_OK;
}

} // namespace ibex::soft::ops
