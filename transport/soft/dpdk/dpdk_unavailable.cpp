// The dpdk port in a build without DPDK: the names are still recognised, so the error
// says what is missing instead of "no such device".
#include "transport/soft/dpdk/dpdk_port.h"
#include "transport/soft/dpdk/memif_fabric.h"

#include "runtime/base/status.h"

namespace ibex::soft {

namespace {
constexpr const char *kNoDpdk = "this ibex was built without DPDK (IBEX_WITH_DPDK=OFF or libdpdk not found)";
}

std::unique_ptr<Port> open_dpdk_port(const DpdkPortOptions &opts, ibex_status_t *status) {
    *status = fail(IBEX_ERR_NOT_SUPPORTED, "%s: %s", opts.device.c_str(), kNoDpdk);
    return nullptr;
}

std::vector<std::unique_ptr<Port>> open_memif_fabric(const std::vector<MemifFabricPort> &, ibex_status_t *status) {
    *status = fail(IBEX_ERR_NOT_SUPPORTED, "memif ports: %s", kNoDpdk);
    return {};
}

bool dpdk_port_stats(const Port &, DpdkPortStats *) { return false; }

} // namespace ibex::soft
