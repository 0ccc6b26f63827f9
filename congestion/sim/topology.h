// A fabric as the simulator sees it: nodes (hosts and switches) joined by full-duplex
// links of a rate and a propagation delay. Built in: N-to-1 star, two-tier leaf-spine,
// three-tier fat-tree (k-ary, with oversubscription at the edge), EFLOPS's BiGraph; or
// read from a file in the HPCC ns-3 simulator's topology format. Pure data: routing and
// queues are the simulator's.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/base/status.h"

namespace ibex::sim {

struct LinkSpec {
    uint32_t a = 0, b = 0; // node ids
    double gbps = 100;
    uint64_t delay_ns = 1000;
};

struct Topology {
    std::string name;
    std::vector<bool> is_switch; // by node id
    std::vector<LinkSpec> links;
    std::vector<uint32_t> hosts; // node id of host h, in host order

    uint32_t nodes() const { return static_cast<uint32_t>(is_switch.size()); }
    uint32_t add_node(bool sw);
    void link(uint32_t a, uint32_t b, double gbps, uint64_t delay_ns) { links.push_back({a, b, gbps, delay_ns}); }
};

struct FabricShape {
    uint32_t hosts = 16;
    double host_gbps = 100;
    double uplink_gbps = 0;   // switch-to-switch links (0: host_gbps)
    uint64_t delay_ns = 1000; // every link's propagation delay
    uint32_t hosts_per_leaf = 0; // leaf-spine, BiGraph (0: a default per builder)
    double oversub = 1;       // leaf-spine, fat-tree: host bandwidth / uplink bandwidth at the edge
};

// One switch, every host on it.
Topology build_star(const FabricShape &s);
// Leaves of hosts_per_leaf hosts (default 32), each joined to every spine; spines =
// ceil(hosts_per_leaf * host_gbps / (oversub * uplink_gbps)).
Topology build_leaf_spine(const FabricShape &s);
// Three-tier k-ary fat-tree (k even, the smallest that holds the hosts): k pods of k/2
// edge and k/2 aggregation switches, (k/2)^2 cores; each edge switch takes
// oversub * k/2 hosts.
Topology build_fat_tree(const FabricShape &s);
// BiGraph (EFLOPS, HPCA 2020): two layers of switches, every switch of one layer joined to
// every switch of the other, hosts_per_leaf hosts (default 16) on each switch of both.
Topology build_bigraph(const FabricShape &s);
// "star", "leaf-spine", "fat-tree" or "bigraph".
ibex_status_t build_named(const std::string &name, const FabricShape &s, Topology &out);

// The HPCC ns-3 format: `node_num switch_num link_num`, the switch ids, then one line per
// link `src dst rate delay error_rate` (rate like 100Gbps, delay like 0.001ms). Hosts are
// the nodes that are not switches, in id order.
ibex_status_t parse_hpcc_topology(const std::string &text, Topology &out);
ibex_status_t load_hpcc_topology(const std::string &path, Topology &out);

} // namespace ibex::sim
