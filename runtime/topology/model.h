// The topology handle behind ibex_topology_t: the hwloc tree plus the devices ibex names
// (GPUs, NICs, NUMA nodes), each with its hwloc object and locality.
#pragma once

#include "runtime/topology/hwloc_util.h"

#include <ibex/topology.h>

#include <array>
#include <string>
#include <vector>

namespace ibex::topo {

struct Device {
    ibex_topo_kind_t kind = IBEX_TOPO_GPU;
    int ordinal = 0;
    std::string label, name, busid, model, rdma, netdev, os_names;
    std::string cpus_list, nodes_list;
    int numa_node = -1;
    int link_width = 0;
    double link_speed = 0;
    hwloc_obj_t obj = nullptr; // the PCI function, or the NUMANode
    Bitmap cpuset;             // local CPUs (the whole machine when unknown)
    Bitmap nodeset;            // local NUMA nodes
    bool locality_known = false;
};

} // namespace ibex::topo

struct ibex_topology {
    ibex::topo::HwlocTopology hw;
    std::string source; // XML path, "" for this machine
    std::string hostname;
    std::vector<ibex::topo::Device> devices; // GPUs, then NICs, then NUMA nodes
    std::array<int, 3> first{};              // index of the first device of each kind
    std::array<int, 3> count{};

    const ibex::topo::Device &of_kind(ibex_topo_kind_t kind, int ordinal) const {
        return devices[first[kind] + ordinal];
    }
};

namespace ibex::topo {

// Loads the machine (xml_path empty) or an XML file and names its devices.
ibex_status_t load(const std::string &xml_path, std::unique_ptr<ibex_topology> &out);
// The path type between two devices of one topology.
ibex_path_type_t path_type(const ibex_topology &topo, const Device &a, const Device &b);
// Index of the device called `name` (label, OS name, RDMA device, netdev, bus id), or -1.
int find_device(const ibex_topology &topo, const std::string &name);
// The NIC binding policy; req is validated by the caller.
ibex_status_t bind(const ibex_topology &topo, const ibex_bind_request_t &req, ibex_binding_t &out);

} // namespace ibex::topo
