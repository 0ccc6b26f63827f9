#include "congestion/sim/routing.h"

#include <algorithm>

namespace ibex::sim {

ibex_status_t Routing::build(const Topology &t) {
    is_switch_ = t.is_switch;
    hosts_ = t.hosts;
    const uint32_t n = t.nodes();
    if (hosts_.size() < 2) return fail(IBEX_ERR_INVALID_ARGUMENT, "topology %s has fewer than 2 hosts", t.name.c_str());
    std::vector<uint32_t> ports(n, 0);
    links_.clear();
    for (const LinkSpec &l : t.links) {
        if (l.a >= n || l.b >= n || !(l.gbps > 0))
            return fail(IBEX_ERR_INVALID_ARGUMENT, "topology %s: link %u-%u is not between two nodes at a positive rate",
                        t.name.c_str(), l.a, l.b);
        links_.push_back({l.a, l.b, ports[l.a]++, ports[l.b]++, l.gbps, l.delay_ns});
        links_.push_back({l.b, l.a, links_.back().to_port, links_.back().from_port, l.gbps, l.delay_ns});
    }
    out_off_.assign(n + 1, 0);
    for (uint32_t v = 0; v < n; ++v) out_off_[v + 1] = out_off_[v] + ports[v];
    out_.assign(links_.size(), 0);
    for (uint32_t i = 0; i < links_.size(); ++i) out_[out_off_[links_[i].from] + links_[i].from_port] = i;

    const size_t h = hosts_.size();
    dist_.assign(size_t(n) * h, 255);
    std::vector<uint32_t> queue;
    queue.reserve(n);
    for (uint32_t d = 0; d < h; ++d) {
        const uint32_t dn = hosts_[d];
        if (is_switch_[dn] || ports[dn] == 0)
            return fail(IBEX_ERR_INVALID_ARGUMENT, "topology %s: host %u (node %u) has no link", t.name.c_str(), d, dn);
        queue.clear();
        queue.push_back(dn);
        dist_[size_t(dn) * h + d] = 0;
        // Breadth first over the reverse links; a host other than the destination is
        // given its distance but never expanded, since hosts do not forward.
        for (size_t i = 0; i < queue.size(); ++i) {
            const uint32_t v = queue[i];
            if (v != dn && !is_switch_[v]) continue;
            const uint8_t dv = dist_[size_t(v) * h + d];
            for (uint32_t l : out_links(v)) {
                const uint32_t u = links_[l].to;
                uint8_t &du = dist_[size_t(u) * h + d];
                if (du != 255 || dv >= 254) continue;
                du = static_cast<uint8_t>(dv + 1);
                queue.push_back(u);
            }
        }
        for (uint32_t s = 0; s < h; ++s)
            if (dist_[size_t(hosts_[s]) * h + d] == 255)
                return fail(IBEX_ERR_INVALID_ARGUMENT, "topology %s: host %u cannot reach host %u", t.name.c_str(), s, d);
    }
    return IBEX_OK;
}

void Routing::path(uint32_t src, uint32_t dst, uint64_t hash, std::vector<uint32_t> &out) const {
    uint32_t v = hosts_[src];
    const uint32_t target = hosts_[dst];
    uint32_t options[256];
    for (int hop = 0; v != target && hop < 255; ++hop) {
        const uint8_t dv = distance(v, dst);
        uint32_t k = 0;
        for (uint32_t l : out_links(v)) {
            const uint32_t u = links_[l].to;
            if (distance(u, dst) + 1 == dv && (u == target || is_switch_[u]) && k < 256) options[k++] = l;
        }
        const uint32_t pick = options[mix64(hash ^ (uint64_t(v) << 32)) % k];
        out.push_back(pick);
        v = links_[pick].to;
    }
}

} // namespace ibex::sim
