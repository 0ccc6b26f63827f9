// ibex_sim: the fabric simulator's command line. Builds a topology, adds a collective
// (allreduce/algorithms' schedules) or flow traffic, runs congestion/sim, and reports.
// See README.md.
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "congestion/dcqcn/params.h"
#include "tools/ibex_sim/collective.h"
#include "tools/ibex_sim/options.h"
#include "tools/ibex_sim/output.h"
#include "tools/ibex_sim/traffic.h"

using namespace ibex;
using namespace ibex::simtool;

namespace {

// The bar goes to stderr only once a run has taken a few seconds, so short runs stay quiet.
class ProgressBar {
public:
    explicit ProgressBar(bool enabled, uint64_t end_ns) : enabled_(enabled), end_ns_(end_ns) {}
    void update(const sim::RunStats &st, uint64_t delivered, uint64_t total) {
        const double wall = seconds();
        if (!enabled_ || wall < 2) return;
        const double frac = end_ns_ ? double(st.sim_ns) / double(end_ns_) : total ? double(delivered) / double(total) : 0;
        char bar[31];
        const int fill = static_cast<int>(std::min(1.0, frac) * 30);
        for (int i = 0; i < 30; ++i) bar[i] = i < fill ? '#' : '.';
        bar[30] = 0;
        std::fprintf(stderr, "\r[%s] %5.1f%%  sim %.3f ms  %.1fM events  %.2fM events/s  %.0f s ", bar, frac * 100,
                     st.sim_ns / 1e6, st.events / 1e6, st.events / wall / 1e6, wall);
        shown_ = true;
    }
    void done() {
        if (shown_) std::fprintf(stderr, "\n");
    }
    double seconds() const {
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    }

private:
    bool enabled_;
    uint64_t end_ns_;
    bool shown_ = false;
    std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

int die(const char *what) {
    std::fprintf(stderr, "ibex_sim: %s: %s\n", what, ibex_last_error());
    return 2;
}

} // namespace

int main(int argc, char **argv) {
    Options o;
    if (parse_options(argc, argv, o) != IBEX_OK) {
        std::fprintf(stderr, "ibex_sim: %s\n%s", ibex_last_error(), usage());
        return 2;
    }
    if (o.help) {
        std::printf("%s", usage());
        return 0;
    }
    sim::Topology topo;
    if (access(o.topology.c_str(), R_OK) == 0) {
        if (load_hpcc_topology(o.topology, topo) != IBEX_OK) return die("topology");
    } else if (sim::build_named(o.topology, o.shape, topo) != IBEX_OK) {
        return die("topology");
    }
    sim::Routing routing;
    if (routing.build(topo) != IBEX_OK) return die("topology");
    sim::SimConfig cfg = o.sim;
    if (cfg.dcqcn && !cc::dcqcn::preset_params(o.dcqcn, o.shape.host_gbps * 1000, cfg.dcqcn_params)) {
        std::fprintf(stderr, "ibex_sim: --dcqcn %s: not paper, mlx5 or off\n", o.dcqcn.c_str());
        return 2;
    }
    sim::Simulator sim(routing, cfg);

    CollectivePlan coll;
    FlowPlan flows;
    if (!o.collective.empty() && add_collective(sim, o.coll, coll) != IBEX_OK) return die("collective");
    if (!o.flows.empty() &&
        add_flows(sim, o.flows, o.shape.host_gbps, cfg.end_ns, cfg.seed, flows) != IBEX_OK)
        return die("flows");
    if (o.collective.empty() && o.flows.empty()) {
        std::fprintf(stderr, "ibex_sim: nothing to run: give --collective or --flows\n%s", usage());
        return 2;
    }

    ProgressBar bar(o.progress, cfg.end_ns);
    const sim::RunStats st = sim.run([&](const sim::RunStats &s, uint64_t d, uint64_t t) { bar.update(s, d, t); });
    bar.done();
    const double wall = bar.seconds();

    uint64_t max_queue = 0;
    for (const sim::PortStats &p : sim.port_stats()) max_queue = std::max(max_queue, p.c.max_queue_bytes);
    std::string json = "{";
    char buf[512];
    auto add = [&](const char *fmt, auto... v) {
        std::snprintf(buf, sizeof buf, fmt, v...);
        json += (json.size() > 1 ? ", " : "") + std::string(buf);
    };
    add("\"topology\": \"%s\"", topo.name.c_str());
    add("\"hosts\": %u", sim.hosts());
    add("\"switches\": %u", sim.switches());
    add("\"events\": %" PRIu64, st.events);
    add("\"wall_s\": %.3f", wall);
    add("\"events_per_s\": %.0f", wall > 0 ? double(st.events) / wall : 0.0);
    add("\"sim_time_s\": %.9f", st.sim_ns * 1e-9);
    add("\"packets\": %" PRIu64, st.packets);
    add("\"cnps\": %" PRIu64, st.cnps);
    add("\"pause_frames\": %" PRIu64, st.pause_frames);
    add("\"drops\": %" PRIu64, st.drops);
    add("\"max_queue_bytes\": %" PRIu64, max_queue);
    add("\"messages\": %zu", sim.messages());
    add("\"all_done\": %s", st.all_done ? "true" : "false");
    if (!o.collective.empty()) {
        const double t = collective_seconds(sim, coll);
        add("\"collective\": \"%s\"", o.coll.algo.c_str());
        add("\"bytes\": %" PRIu64, o.coll.bytes);
        add("\"ranks\": %u", coll.ranks);
        add("\"collective_time_s\": %.9f", st.all_done ? t : 0.0);
        add("\"busbw_gbps\": %.3f", st.all_done ? busbw_gbps(o.coll.bytes, coll.ranks, t) : 0.0);
        coll::Selector sel;
        sel.configure(static_cast<int>(coll.ranks), o.coll.slice_bytes,
                      fabric_cost_model(sim, coll, cfg.mtu, cfg.header_bytes));
        add("\"model_s\": {\"ring\": %.9f, \"rhd\": %.9f, \"tree\": %.9f}", sel.cost(coll::Algo::ring, o.coll.bytes),
            sel.cost(coll::Algo::rhd, o.coll.bytes), sel.cost(coll::Algo::tree, o.coll.bytes));
        add("\"model_choice\": \"%s\"", coll::algo_name(sel.choose(o.coll.bytes)));
    }
    if (!o.flows.empty()) {
        std::vector<double> fct;
        for (uint32_t m : flows.messages)
            if (const sim::MessageResult r = sim.result(m); r.done_ns) fct.push_back(double(r.done_ns - r.ready_ns) / 1e3);
        std::sort(fct.begin(), fct.end());
        double mean = 0;
        for (double x : fct) mean += x / double(fct.size());
        add("\"flows\": %zu", flows.messages.size());
        add("\"flows_done\": %zu", fct.size());
        add("\"mean_fct_us\": %.3f", mean);
        add("\"p99_fct_us\": %.3f", fct.empty() ? 0.0 : fct[std::min(fct.size() - 1, fct.size() * 99 / 100)]);
    }
    json += "}";

    if (!o.out.empty()) {
        if (mkdir(o.out.c_str(), 0755) != 0 && errno != EEXIST) {
            fail_errno(IBEX_ERR_SYSTEM, errno, "cannot create %s", o.out.c_str());
            return die("--out");
        }
        OutputInfo info;
        info.host_gbps = o.shape.host_gbps;
        if (!o.flows.empty() && flows.messages.size() <= 1'000'000) info.flow_messages = flows.messages;
        if (write_csvs(sim, info, o.out) != IBEX_OK) return die("--out");
        if (FILE *f = std::fopen((o.out + "/summary.json").c_str(), "w")) {
            std::fprintf(f, "%s\n", json.c_str());
            std::fclose(f);
        }
        if (o.plots && draw_plots(sim, info, o.out) != IBEX_OK) return die("plots");
    }
    if (o.json) {
        std::printf("%s\n", json.c_str());
    } else {
        std::printf("%s, %u hosts, %u switches: %" PRIu64 " events in %.2f s (%.2fM events/s), simulated %.6f s\n",
                    topo.name.c_str(), sim.hosts(), sim.switches(), st.events, wall,
                    wall > 0 ? st.events / wall / 1e6 : 0.0, st.sim_ns * 1e-9);
        std::printf("packets %" PRIu64 "  CNPs %" PRIu64 "  pause frames %" PRIu64 "  drops %" PRIu64
                    "  deepest queue %.1f KB\n",
                    st.packets, st.cnps, st.pause_frames, st.drops, max_queue / 1024.0);
        if (!o.collective.empty()) {
            const double t = collective_seconds(sim, coll);
            std::printf("%s allreduce of %" PRIu64 " bytes over %u ranks: %.6f s, busbw %.2f Gbit/s%s\n",
                        o.coll.algo.c_str(), o.coll.bytes, coll.ranks, t, busbw_gbps(o.coll.bytes, coll.ranks, t),
                        st.all_done ? "" : " (not finished by --duration-us)");
        }
    }
    return st.all_done || cfg.end_ns ? 0 : 1;
}
