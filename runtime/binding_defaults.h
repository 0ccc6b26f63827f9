// Where a context's progress thread runs when the caller does not say: IBEX_PROGRESS_CPUS,
// else the CPUs local to the NIC behind the device name (hwloc topology), else nowhere in
// particular. Runs once per opened context, never per packet.
#pragma once

#include <string>

namespace ibex {

// A cpulist, or "" for no pinning. `device` is an ibex device name ("udp:eth0").
std::string progress_cpus_for(const char *device);

} // namespace ibex
