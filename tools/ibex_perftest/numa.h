// NUMA placement as recent perftest does it: the measuring thread and its buffers on the
// NUMA node of the NIC behind the device, unless --disable_numa.
#pragma once

#include <string>

namespace ibex::perftest {

struct NumaPlacement {
    int node = -1;        // buffers go here; -1: no preference
    std::string cpus;     // this thread's CPUs after binding; "" when not bound
    std::string summary;  // for the header block: "node 0 (CPUs 0-7)", "off (--disable_numa)", ...
};

// The name the host topology knows the device's NIC by, or "" when it has none:
// "udp:eth0" -> "eth0", "mlx5_0" -> "mlx5_0", "dpdk:af_xdp:eth1,ip=..." -> "eth1",
// "dpdk:pci:0000:3b:00.0" -> the PCI address; udp:lo and dpdk:memif have no NIC.
std::string nic_name(const std::string &device);

// Looks the device's NIC up in the host topology (udp:<netdev>, an RDMA device name) and,
// when it has one NUMA node, binds the calling thread to the NIC-local CPUs. Never fails:
// a device without a NIC behind it (loopback, a memif) or an unknown topology leaves the
// thread where it is, and the summary says why.
NumaPlacement place_near_nic(const std::string &device, bool enabled);

} // namespace ibex::perftest
