// The dpdk port in a build without DPDK: the names are still recognised, so the error
// says what is missing instead of "no such device".
#include "transport/soft/dpdk/dpdk_port.h"

#include "runtime/base/status.h"

namespace ibex::soft {

std::unique_ptr<Port> open_dpdk_port(const DpdkPortOptions &opts, ibex_status_t *status) {
    *status = fail(IBEX_ERR_NOT_SUPPORTED, "%s: this ibex was built without DPDK (IBEX_WITH_DPDK=OFF or libdpdk not found)",
                   opts.device.c_str());
    return nullptr;
}

bool dpdk_port_stats(const Port &, DpdkPortStats *) { return false; }

} // namespace ibex::soft
