// Devices and contexts: which names the provider serves, and opening a device's RoCE v2
// port with the GID ibex sends from.
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <string>

#include <infiniband/verbs.h>

#include "runtime/base/log.h"
#include "runtime/base/rootfs.h"
#include "runtime/base/status.h"
#include "transport/qp_attrs.h"
#include "transport/verbs/gid_select.h"
#include "transport/verbs/gpu_reg.h"
#include "transport/verbs/objects.h"
#include "transport/verbs/ops.h"
#include "transport/verbs/sysfs.h"
#include "transport/verbs/work_map.h"

namespace ibex::verbs {
namespace {

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

const char *port_state_name(ibv_port_state s) { return ibv_port_state_str(s); }

} // namespace

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
    ctx->max_msg_size = pattr.max_msg_sz;
    ctx->port.max_rd_atomic = static_cast<uint8_t>(std::min(dattr.max_qp_init_rd_atom, 16));
    ctx->port.max_dest_rd_atomic = static_cast<uint8_t>(std::min(dattr.max_qp_rd_atom, 16));
    const PathDefaults path = PathDefaults::from_env(); // IBEX_SL, IBEX_TRAFFIC_CLASS
    ctx->port.sl = static_cast<uint8_t>(path.sl >= 0 ? path.sl : 0);
    ctx->traffic_class = path.traffic_class;
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

ibex_status_t query_device(ibex_context *c, ibex_device_attr_t *out) {
    const VerbsContext *ctx = vctx_of(c);
    out->max_msg_size = ctx->max_msg_size;
    out->max_mtu = static_cast<uint32_t>(ctx->port.active_mtu);
    // The RNIC segments and acknowledges in hardware; a message costs the host a WQE and a
    // CQE, well under a microsecond, a sixteenth of 64 KiB at 100 Gbit/s.
    out->efficient_msg_bytes = size_t(64) << 10;
    return IBEX_OK;
}

// The RNIC progresses by itself; the call exists so portable callers need no branch.
ibex_status_t progress(ibex_context *) { return IBEX_OK; }


} // namespace ibex::verbs
