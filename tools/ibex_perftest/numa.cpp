#include "tools/ibex_perftest/numa.h"

#include <ibex/topology.h>
#include <sched.h>

#include "runtime/base/cpuset.h"

namespace ibex::perftest {

std::string nic_name(const std::string &device) {
    if (device.rfind("dpdk:", 0) == 0) {
        const std::string target = device.substr(5, device.find(',') - 5);
        for (const char *prefix : {"af_packet:", "af_xdp:", "pci:"})
            if (target.rfind(prefix, 0) == 0) return target.substr(std::string(prefix).size());
        return "";
    }
    const size_t colon = device.find(':');
    std::string name = colon == std::string::npos ? device : device.substr(colon + 1);
    if (const size_t c = name.find(':'); c != std::string::npos) name.resize(c); // "udp:eth0:4791"
    return name == "lo" ? "" : name;
}

NumaPlacement place_near_nic(const std::string &device, bool enabled) {
    NumaPlacement p;
    if (!enabled) {
        p.summary = "off (--disable_numa)";
        return p;
    }
    const std::string name = nic_name(device);
    if (name.empty()) {
        p.summary = "not bound (" + device + " has no NIC)";
        return p;
    }
    ibex_topology_t *topo = nullptr;
    if (ibex_topo_load(nullptr, &topo) != IBEX_OK) {
        p.summary = "not bound (host topology unknown)";
        return p;
    }
    int index = -1;
    ibex_topo_device_t d{};
    d.size = sizeof d;
    if (ibex_topo_find(topo, name.c_str(), &index) != IBEX_OK || ibex_topo_device(topo, index, &d) != IBEX_OK ||
        d.kind != IBEX_TOPO_NIC) {
        p.summary = "not bound (no NIC named " + name + " in the topology)";
    } else if (d.numa_node < 0) {
        p.summary = "not bound (NIC " + name + " has no single NUMA node)";
    } else {
        p.node = d.numa_node;
        ibex::CpuSet set;
        std::string err;
        cpu_set_t mask;
        CPU_ZERO(&mask);
        if (d.cpus && ibex::CpuSet::parse_list(d.cpus, set, err, CPU_SETSIZE) && !set.empty()) {
            for (unsigned c : set.cpus()) CPU_SET(c, &mask);
            if (sched_setaffinity(0, sizeof mask, &mask) == 0) p.cpus = set.to_list();
        }
        p.summary = "node " + std::to_string(p.node) + (p.cpus.empty() ? " (memory only)" : " (CPUs " + p.cpus + ")");
    }
    ibex_topo_free(topo);
    return p;
}

} // namespace ibex::perftest
