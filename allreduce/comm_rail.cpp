#include "allreduce/comm_rail.h"
#include "allreduce/comm_topology.h"

#include <ibex/topology.h>

#include <memory>

#include "runtime/base/log.h"
#include "runtime/base/status.h"

namespace ibex::coll {

bool is_rail_device(const std::string &spec) { return spec == "rail" || spec.rfind("rail:", 0) == 0; }

ibex_status_t rail_device(const std::string &spec, int local_rank, int local_size, std::string *device) {
    const std::string kind = spec == "rail" ? "" : spec.substr(5);
    if (!kind.empty() && kind != "udp" && kind != "verbs")
        return fail(IBEX_ERR_INVALID_ARGUMENT, "device \"%s\": expected rail, rail:udp or rail:verbs", spec.c_str());
    ibex_topology_t *raw = nullptr;
    IBEX_TRY(ibex_topo_load(nullptr, &raw));
    const std::unique_ptr<ibex_topology_t, void (*)(ibex_topology_t *)> topo(raw, ibex_topo_free);
    if (ibex_topo_count(topo.get(), IBEX_TOPO_NIC) <= 0)
        return fail(IBEX_ERR_NO_DEVICE, "device \"%s\": the topology (%s) has no NIC to bind local rank %d to",
                    spec.c_str(), *ibex_topo_source(topo.get()) ? ibex_topo_source(topo.get()) : "this machine",
                    local_rank);
    ibex_bind_request_t req = IBEX_BIND_REQUEST_INIT;
    req.local_rank = local_rank;
    req.local_size = local_size;
    ibex_binding_t b{};
    b.size = sizeof b;
    IBEX_TRY(ibex_topo_bind(topo.get(), &req, &b));
    ibex_topo_device_t nic{};
    nic.size = sizeof nic;
    IBEX_TRY(ibex_topo_device(topo.get(), b.nics[0], &nic));
    const bool has_rdma = nic.rdma_device && *nic.rdma_device;
    if (kind == "verbs" || (kind.empty() && has_rdma && device_listed(nic.rdma_device))) {
        if (!has_rdma)
            return fail(IBEX_ERR_NO_DEVICE, "device \"%s\": local rank %d's NIC %s (%s) has no RDMA device",
                        spec.c_str(), local_rank, nic.label, nic.pci_busid);
        *device = nic.rdma_device;
    } else {
        if (!nic.netdev || !*nic.netdev)
            return fail(IBEX_ERR_NO_DEVICE, "device \"%s\": local rank %d's NIC %s (%s) has no network interface for udp",
                        spec.c_str(), local_rank, nic.label, nic.pci_busid);
        *device = std::string("udp:") + nic.netdev;
        if (local_size > 1) *device = udp_device_for_local_rank(*device, local_rank);
    }
    IBEX_LOG(info, "rail: local rank %d of %d bound to %s (%s%s%s): opening %s", local_rank, local_size, nic.label,
             has_rdma ? nic.rdma_device : "", has_rdma && *nic.netdev ? ", " : "", nic.netdev ? nic.netdev : "",
             device->c_str());
    return IBEX_OK;
}

} // namespace ibex::coll
