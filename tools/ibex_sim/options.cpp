#include "tools/ibex_sim/options.h"

#include <cstdlib>
#include <cstring>

#include "tools/ibex_sim/traffic.h"

namespace ibex::simtool {
namespace {

bool to_double(const char *s, double lo, double hi, double *out) {
    char *end = nullptr;
    const double v = std::strtod(s, &end);
    if (end == s || *end || !(v >= lo && v <= hi)) return false;
    *out = v;
    return true;
}

template <typename T>
bool to_uint(const char *s, uint64_t lo, uint64_t hi, T *out) {
    char *end = nullptr;
    const unsigned long long v = std::strtoull(s, &end, 10);
    if (end == s || *end || v < lo || v > hi) return false;
    *out = static_cast<T>(v);
    return true;
}

} // namespace

const char *usage() {
    return "usage: ibex_sim --topology star|leaf-spine|fat-tree|bigraph|FILE --hosts N --link-gbps R\n"
           "               [--collective ring|rhd|tree|hierarchical|bigraph|gdraa --bytes S] [--flows SPEC]\n"
           "               [--dcqcn paper|mlx5|off] [--out DIR] [--json] ...\n"
           "fabric:     --uplink-gbps R  --hosts-per-leaf K  --oversub X  --delay-ns D (per link, 1000)\n"
           "            FILE: HPCC ns-3 topology (node_num switch_num link_num / switch ids / links)\n"
           "collective: --bytes S (K/M/G)  --ranks-per-host K  --placement linear|strided|random\n"
           "            --slice S (128K, as IBEX_COMM_SLICE)\n"
           "flows:      long | incast:N[:BYTES] | cdf:FILE[:LOAD]   --duration-us T (stop time)\n"
           "packets:    --mtu B (payload per packet, 4096; a larger segment runs faster, less exactly)\n"
           "            --header-bytes B (62)\n"
           "switches:   --buffer-kb K (32768)  --reserve-kb K (8, per port)\n"
           "            --ecn on|off  --kmin-kb --kmax-kb --pmax  --mark enqueue|dequeue\n"
           "            --pfc on|off (on)  --xoff-kb --xon-kb  --rto-us T (100, resend after a drop)\n"
           "output:     --sample-us T (queue/rate series period)  --no-plots  --no-progress  --seed N\n";
}

ibex_status_t parse_options(int argc, char **argv, Options &o) {
    o.sim.sw.pause = true;
    // A data-centre switch, not ibex_switch's 2 MiB software one: 32 MiB shared (a 32 x
    // 100G ASIC's order), 8 KiB kept per port, PFC xoff well inside one port's share.
    o.sim.sw.buffer_bytes = 32u << 20;
    o.sim.sw.reserve_bytes = 8u << 10;
    o.sim.sw.xoff_bytes = 512u << 10;
    o.sim.sw.xon_bytes = 256u << 10;
    bool sample_set = false;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        const auto flag = [&](const char *name) { return a == name; };
        if (flag("--help") || flag("-h")) {
            o.help = true;
            continue;
        }
        if (flag("--json")) {
            o.json = true;
            continue;
        }
        if (flag("--no-progress")) {
            o.progress = false;
            continue;
        }
        if (flag("--no-plots")) {
            o.plots = false;
            continue;
        }
        if (i + 1 >= argc || std::strncmp(argv[i], "--", 2) != 0)
            return fail(IBEX_ERR_INVALID_ARGUMENT, "%s: unknown, or missing its value", argv[i]);
        const char *v = argv[++i];
        bool ok = true;
        double d = 0;
        uint64_t u = 0;
        if (flag("--topology")) o.topology = v;
        else if (flag("--hosts")) ok = to_uint(v, 2, 1u << 20, &o.shape.hosts);
        else if (flag("--link-gbps")) ok = to_double(v, 1e-3, 1e5, &o.shape.host_gbps);
        else if (flag("--uplink-gbps")) ok = to_double(v, 1e-3, 1e5, &o.shape.uplink_gbps);
        else if (flag("--hosts-per-leaf")) ok = to_uint(v, 1, 1u << 16, &o.shape.hosts_per_leaf);
        else if (flag("--oversub")) ok = to_double(v, 1e-3, 1e3, &o.shape.oversub);
        else if (flag("--delay-ns")) ok = to_uint(v, 0, 1'000'000'000, &o.shape.delay_ns);
        else if (flag("--collective")) o.collective = o.coll.algo = v;
        else if (flag("--bytes")) ok = parse_size(v, &o.coll.bytes) && o.coll.bytes > 0;
        else if (flag("--ranks-per-host")) ok = to_uint(v, 1, 1024, &o.coll.ranks_per_host);
        else if (flag("--placement")) o.coll.placement = v;
        else if (flag("--slice")) ok = parse_size(v, &u) && u >= 4096 && (o.coll.slice_bytes = u, true);
        else if (flag("--flows")) o.flows = v;
        else if (flag("--duration-us")) ok = to_double(v, 0.001, 1e9, &d) && (o.sim.end_ns = uint64_t(d * 1e3), true);
        else if (flag("--dcqcn")) {
            o.dcqcn = v;
            o.sim.dcqcn = o.dcqcn != "off";
        } else if (flag("--mtu")) ok = to_uint(v, 64, 1u << 24, &o.sim.mtu);
        else if (flag("--header-bytes")) ok = to_uint(v, 0, 4096, &o.sim.header_bytes);
        else if (flag("--buffer-kb")) ok = to_uint(v, 1, 1u << 22, &u) && (o.sim.sw.buffer_bytes = u << 10, true);
        else if (flag("--reserve-kb")) ok = to_uint(v, 0, 1u << 22, &u) && (o.sim.sw.reserve_bytes = u << 10, true);
        else if (flag("--ecn")) ok = (o.sim.sw.ecn = !std::strcmp(v, "on"), !std::strcmp(v, "on") || !std::strcmp(v, "off"));
        else if (flag("--kmin-kb")) ok = to_uint(v, 0, 1u << 22, &u) && (o.sim.sw.red.kmin_bytes = u << 10, true);
        else if (flag("--kmax-kb")) ok = to_uint(v, 0, 1u << 22, &u) && (o.sim.sw.red.kmax_bytes = u << 10, true);
        else if (flag("--pmax")) ok = to_double(v, 0, 1, &o.sim.sw.red.pmax);
        else if (flag("--mark")) {
            ok = !std::strcmp(v, "enqueue") || !std::strcmp(v, "dequeue");
            o.sim.sw.mark_at = !std::strcmp(v, "enqueue") ? cc::MarkAt::kEnqueue : cc::MarkAt::kDequeue;
        } else if (flag("--pfc")) ok = (o.sim.sw.pause = !std::strcmp(v, "on"), !std::strcmp(v, "on") || !std::strcmp(v, "off"));
        else if (flag("--xoff-kb")) ok = to_uint(v, 1, 1u << 22, &u) && (o.sim.sw.xoff_bytes = u << 10, true);
        else if (flag("--xon-kb")) ok = to_uint(v, 0, 1u << 22, &u) && (o.sim.sw.xon_bytes = u << 10, true);
        else if (flag("--rto-us")) ok = to_double(v, 0.001, 1e7, &d) && (o.sim.rto_ns = uint64_t(d * 1e3), true);
        else if (flag("--sample-us")) ok = to_double(v, 0.001, 1e9, &d) && (o.sim.sample_ns = uint64_t(d * 1e3), sample_set = true);
        else if (flag("--seed")) ok = to_uint(v, 0, UINT64_MAX, &o.sim.seed) && (o.coll.seed = o.sim.seed, true);
        else if (flag("--out")) o.out = v;
        else return fail(IBEX_ERR_INVALID_ARGUMENT, "%s: unknown option", argv[i - 1]);
        if (!ok) return fail(IBEX_ERR_INVALID_ARGUMENT, "%s %s: not a valid value", argv[i - 1], v);
    }
    if (o.sim.sw.xon_bytes > o.sim.sw.xoff_bytes)
        return fail(IBEX_ERR_INVALID_ARGUMENT, "--xon-kb must not exceed --xoff-kb");
    if (o.sim.sw.red.kmax_bytes < o.sim.sw.red.kmin_bytes)
        return fail(IBEX_ERR_INVALID_ARGUMENT, "--kmax-kb must not be below --kmin-kb");
    if (!o.collective.empty() && !o.flows.empty())
        return fail(IBEX_ERR_INVALID_ARGUMENT, "give --collective or --flows, not both");
    if (o.topology == "bigraph") o.coll.bigraph_per_switch = o.shape.hosts_per_leaf ? o.shape.hosts_per_leaf : 16;
    // Series only when asked for or when there is a place to write them, at 1/1000 of the run.
    if (!sample_set && !o.out.empty()) o.sim.sample_ns = o.sim.end_ns ? std::max<uint64_t>(1000, o.sim.end_ns / 1000) : 5000;
    return IBEX_OK;
}

} // namespace ibex::simtool
