#include "runtime/binding_defaults.h"

#include <arpa/inet.h>
#include <cstring>

#include <ibex/topology.h>

#include "runtime/base/config.h"
#include "runtime/base/log.h"

namespace ibex {

std::string progress_cpus_for(const char *device) {
    if (const char *env = config::get_string("IBEX_PROGRESS_CPUS", nullptr)) return env;
    const char *colon = std::strchr(device, ':');
    std::string name = colon ? colon + 1 : device;
    if (auto c = name.find(':'); c != std::string::npos) name.resize(c); // "udp:eth0:4791"
    in_addr a;
    // Loopback and bare addresses name no NIC: leave the thread to the scheduler, and
    // spare every test context the cost of a topology scan.
    if (name.empty() || name == "lo" || inet_pton(AF_INET, name.c_str(), &a) == 1) return "";
    ibex_topology_t *topo = nullptr;
    if (ibex_topo_load(nullptr, &topo) != IBEX_OK) return "";
    std::string cpus;
    int index = -1;
    ibex_topo_device_t d{};
    d.size = sizeof d;
    if (ibex_topo_find(topo, name.c_str(), &index) == IBEX_OK && ibex_topo_device(topo, index, &d) == IBEX_OK &&
        d.kind == IBEX_TOPO_NIC && d.cpus && *d.cpus) {
        cpus = d.cpus;
        IBEX_LOG(info, "device %s: progress thread on the NIC-local CPUs %s", device, cpus.c_str());
    }
    ibex_topo_free(topo);
    return cpus;
}

} // namespace ibex
