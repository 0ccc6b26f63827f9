// Shortest-path routing over a Topology with ECMP: each full-duplex link becomes two
// directed links (2i: a->b, 2i+1: b->a), each node numbers its links as ports in the order
// they were added, and a path picks among the equal-cost next hops by a hash, so one
// flow's packets keep one path while flows spread over all of them. Hosts never forward.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "congestion/sim/topology.h"
#include "runtime/base/status.h"

namespace ibex::sim {

struct DirectedLink {
    uint32_t from, to;           // nodes
    uint32_t from_port, to_port; // the link's port number at each end
    double gbps;
    uint64_t delay_ns;
};

class Routing {
public:
    // Fails on a host with no link, or a host another host cannot reach.
    ibex_status_t build(const Topology &t);

    const std::vector<DirectedLink> &links() const { return links_; }
    static uint32_t reverse(uint32_t link) { return link ^ 1u; }
    // The links leaving `node`, by port number.
    std::span<const uint32_t> out_links(uint32_t node) const {
        return {out_.data() + out_off_[node], out_off_[node + 1] - out_off_[node]};
    }
    uint32_t host_node(uint32_t host) const { return hosts_[host]; }
    uint32_t hosts() const { return static_cast<uint32_t>(hosts_.size()); }
    bool is_switch(uint32_t node) const { return is_switch_[node]; }
    uint32_t nodes() const { return static_cast<uint32_t>(is_switch_.size()); }
    // Hops from `node` to host `host` (255: unreachable).
    uint8_t distance(uint32_t node, uint32_t host) const { return dist_[size_t(node) * hosts_.size() + host]; }
    // Appends the directed links of a shortest path from host `src` to host `dst`;
    // `hash` chooses at each equal-cost fork.
    void path(uint32_t src, uint32_t dst, uint64_t hash, std::vector<uint32_t> &out) const;

private:
    std::vector<bool> is_switch_;
    std::vector<uint32_t> hosts_;
    std::vector<DirectedLink> links_;
    std::vector<uint32_t> out_off_, out_;
    std::vector<uint8_t> dist_;
};

// splitmix64: spreads QP numbers into ECMP hashes.
inline uint64_t mix64(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

} // namespace ibex::sim
