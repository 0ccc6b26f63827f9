#include "congestion/sim/topology.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace ibex::sim {
namespace {

double uplink(const FabricShape &s) { return s.uplink_gbps > 0 ? s.uplink_gbps : s.host_gbps; }

uint32_t div_up(uint32_t a, uint32_t b) { return (a + b - 1) / b; }

// Host after host onto `sw`, `per` to a switch, until all are placed.
void attach_hosts(Topology &t, const std::vector<uint32_t> &sw, uint32_t per, const FabricShape &s) {
    for (uint32_t h = 0; h < s.hosts; ++h) {
        const uint32_t node = t.add_node(false);
        t.hosts.push_back(node);
        t.link(node, sw[h / per], s.host_gbps, s.delay_ns);
    }
}

std::vector<uint32_t> add_switches(Topology &t, uint32_t n) {
    std::vector<uint32_t> out(n);
    for (uint32_t &x : out) x = t.add_node(true);
    return out;
}

// Every switch of `a` to every switch of `b` (a leaf-spine's two tiers, a fat-tree pod's
// edge and aggregation, BiGraph's two layers).
void join_all(Topology &t, const std::vector<uint32_t> &a, const std::vector<uint32_t> &b, const FabricShape &s) {
    for (uint32_t x : a)
        for (uint32_t y : b) t.link(x, y, uplink(s), s.delay_ns);
}

// "100Gbps", "40G", "10Mbps" -> Gbit/s; "0.001ms", "1us", "500ns" -> ns.
bool parse_rate(const std::string &x, double *gbps) {
    char *end = nullptr;
    const double v = std::strtod(x.c_str(), &end);
    const std::string unit(end);
    double scale = 0;
    if (unit == "Gbps" || unit == "G" || unit == "Gb/s") scale = 1;
    else if (unit == "Mbps" || unit == "M") scale = 1e-3;
    else if (unit == "Kbps" || unit == "K") scale = 1e-6;
    else if (unit == "bps" || unit.empty()) scale = 1e-9;
    *gbps = v * scale;
    return end != x.c_str() && scale > 0 && v > 0;
}

bool parse_delay(const std::string &x, uint64_t *ns) {
    char *end = nullptr;
    const double v = std::strtod(x.c_str(), &end);
    const std::string unit(end);
    double scale = 0;
    if (unit == "ms") scale = 1e6;
    else if (unit == "us") scale = 1e3;
    else if (unit == "ns") scale = 1;
    else if (unit == "s" || unit.empty()) scale = 1e9;
    *ns = static_cast<uint64_t>(std::llround(v * scale));
    return end != x.c_str() && scale > 0 && v >= 0;
}

} // namespace

uint32_t Topology::add_node(bool sw) {
    is_switch.push_back(sw);
    return nodes() - 1;
}

Topology build_star(const FabricShape &s) {
    Topology t;
    t.name = "star";
    const uint32_t sw = t.add_node(true);
    attach_hosts(t, {sw}, s.hosts, s);
    return t;
}

Topology build_leaf_spine(const FabricShape &s) {
    Topology t;
    t.name = "leaf-spine";
    const uint32_t per = s.hosts_per_leaf ? s.hosts_per_leaf : std::min<uint32_t>(s.hosts, 32);
    const uint32_t leaves = div_up(s.hosts, per);
    const uint32_t spines =
        std::max<uint32_t>(1, static_cast<uint32_t>(std::ceil(per * s.host_gbps / (s.oversub * uplink(s)) - 1e-9)));
    const std::vector<uint32_t> leaf = add_switches(t, leaves), spine = add_switches(t, spines);
    join_all(t, leaf, spine, s);
    attach_hosts(t, leaf, per, s);
    return t;
}

Topology build_fat_tree(const FabricShape &s) {
    Topology t;
    t.name = "fat-tree";
    const double ov = std::max(1.0, s.oversub);
    uint32_t k = 2;
    while (static_cast<double>(k) * k * k / 4 * ov < s.hosts) k += 2;
    const uint32_t half = k / 2, per = std::max<uint32_t>(1, static_cast<uint32_t>(half * ov));
    std::vector<uint32_t> edge;
    const std::vector<uint32_t> core = add_switches(t, half * half);
    for (uint32_t pod = 0; pod < k; ++pod) {
        const std::vector<uint32_t> agg = add_switches(t, half);
        // Aggregation switch i of every pod reaches core group i.
        for (uint32_t i = 0; i < half; ++i)
            join_all(t, {agg[i]}, std::vector<uint32_t>(core.begin() + i * half, core.begin() + (i + 1) * half), s);
        const std::vector<uint32_t> pod_edge = add_switches(t, half);
        join_all(t, pod_edge, agg, s);
        edge.insert(edge.end(), pod_edge.begin(), pod_edge.end());
    }
    attach_hosts(t, edge, per, s);
    return t;
}

Topology build_bigraph(const FabricShape &s) {
    Topology t;
    t.name = "bigraph";
    const uint32_t per = s.hosts_per_leaf ? s.hosts_per_leaf : 16;
    const uint32_t layer = std::max<uint32_t>(1, div_up(div_up(s.hosts, per), 2));
    const std::vector<uint32_t> upper = add_switches(t, layer), lower = add_switches(t, layer);
    join_all(t, upper, lower, s);
    // Alternate layers so both fill evenly: hosts 0..per-1 on upper 0, the next on lower 0, ...
    std::vector<uint32_t> order;
    for (uint32_t i = 0; i < layer; ++i) {
        order.push_back(upper[i]);
        order.push_back(lower[i]);
    }
    attach_hosts(t, order, per, s);
    return t;
}

ibex_status_t build_named(const std::string &name, const FabricShape &s, Topology &out) {
    if (s.hosts < 2) return fail(IBEX_ERR_INVALID_ARGUMENT, "a fabric needs at least 2 hosts, not %u", s.hosts);
    if (!(s.host_gbps > 0) || s.uplink_gbps < 0 || !(s.oversub > 0))
        return fail(IBEX_ERR_INVALID_ARGUMENT, "link rates and oversubscription must be positive");
    if (name == "star") out = build_star(s);
    else if (name == "leaf-spine") out = build_leaf_spine(s);
    else if (name == "fat-tree") out = build_fat_tree(s);
    else if (name == "bigraph") out = build_bigraph(s);
    else
        return fail(IBEX_ERR_INVALID_ARGUMENT,
                    "topology \"%s\" is not star, leaf-spine, fat-tree, bigraph or a readable file", name.c_str());
    return IBEX_OK;
}

ibex_status_t parse_hpcc_topology(const std::string &text, Topology &out) {
    std::istringstream in(text);
    long nodes = 0, switches = 0, links = 0;
    if (!(in >> nodes >> switches >> links) || nodes < 2 || switches < 0 || switches >= nodes || links < 1 ||
        nodes > (1 << 24))
        return fail(IBEX_ERR_INVALID_ARGUMENT, "topology: the first line must be `node_num switch_num link_num`");
    Topology t;
    t.name = "file";
    t.is_switch.assign(static_cast<size_t>(nodes), false);
    for (long i = 0; i < switches; ++i) {
        long id = -1;
        if (!(in >> id) || id < 0 || id >= nodes)
            return fail(IBEX_ERR_INVALID_ARGUMENT, "topology: switch id %ld of %ld is missing or not a node", i + 1,
                        switches);
        t.is_switch[static_cast<size_t>(id)] = true;
    }
    std::string line;
    std::getline(in, line); // the rest of the switch line
    for (long i = 0; i < links; ++i) {
        if (!std::getline(in, line))
            return fail(IBEX_ERR_INVALID_ARGUMENT, "topology: %ld links announced, %ld found", links, i);
        std::istringstream l(line);
        long a = -1, b = -1;
        std::string rate, delay;
        LinkSpec ls;
        if (!(l >> a >> b >> rate >> delay) || a < 0 || b < 0 || a >= nodes || b >= nodes || a == b ||
            !parse_rate(rate, &ls.gbps) || !parse_delay(delay, &ls.delay_ns))
            return fail(IBEX_ERR_INVALID_ARGUMENT, "topology: link line %ld `%s` is not `src dst rate delay error_rate`",
                        i + 1, line.c_str());
        ls.a = static_cast<uint32_t>(a);
        ls.b = static_cast<uint32_t>(b);
        t.links.push_back(ls);
    }
    for (uint32_t n = 0; n < t.nodes(); ++n)
        if (!t.is_switch[n]) t.hosts.push_back(n);
    out = std::move(t);
    return IBEX_OK;
}

ibex_status_t load_hpcc_topology(const std::string &path, Topology &out) {
    std::ifstream f(path);
    if (!f) return fail_errno(IBEX_ERR_INVALID_ARGUMENT, errno, "cannot read topology file %s", path.c_str());
    std::stringstream ss;
    ss << f.rdbuf();
    return parse_hpcc_topology(ss.str(), out);
}

} // namespace ibex::sim
