#include "tools/ibex_sim/output.h"

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>

namespace ibex::simtool {
namespace {

struct FileCloser {
    void operator()(FILE *f) const { std::fclose(f); }
};
using File = std::unique_ptr<FILE, FileCloser>;

ibex_status_t open_out(const std::string &path, File &f) {
    f.reset(std::fopen(path.c_str(), "w"));
    if (!f) return fail_errno(IBEX_ERR_SYSTEM, errno, "cannot write %s", path.c_str());
    return IBEX_OK;
}

// The egress ports with the deepest queues, at most `n`.
std::vector<sim::PortStats> deepest_ports(const sim::Simulator &sim, size_t n) {
    std::vector<sim::PortStats> p = sim.port_stats();
    std::sort(p.begin(), p.end(),
              [](const sim::PortStats &a, const sim::PortStats &b) { return a.c.max_queue_bytes > b.c.max_queue_bytes; });
    while (!p.empty() && p.back().c.max_queue_bytes == 0) p.pop_back();
    if (p.size() > n) p.resize(n);
    return p;
}

} // namespace

ibex_status_t write_csvs(const sim::Simulator &sim, const OutputInfo &info, const std::string &dir) {
    File f;
    IBEX_TRY(open_out(dir + "/ports.csv", f));
    std::fprintf(f.get(), "switch,port,peer_node,tx_packets,tx_bytes,max_queue_bytes,marked,dropped,xoff,pause_frames_sent\n");
    for (const sim::PortStats &p : sim.port_stats())
        std::fprintf(f.get(), "%u,%u,%u,%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 "\n",
                     p.sw, p.port, p.peer_node, p.c.tx_packets, p.c.tx_bytes, p.c.max_queue_bytes, p.c.marked,
                     p.c.dropped, p.c.pauses, sim.pauses_sent(p.sw, p.port));
    // Series by port and by QP, then time: gnuplot draws a line only through adjacent rows.
    std::vector<sim::QueueRecord> queues = sim.queue_series();
    std::stable_sort(queues.begin(), queues.end(), [](const sim::QueueRecord &a, const sim::QueueRecord &b) {
        return a.sw != b.sw ? a.sw < b.sw : a.port < b.port;
    });
    IBEX_TRY(open_out(dir + "/queues.csv", f));
    std::fprintf(f.get(), "t_us,switch,port,queue_bytes\n");
    for (const sim::QueueRecord &r : queues)
        std::fprintf(f.get(), "%.3f,%u,%u,%" PRIu64 "\n", r.t_ns / 1e3, r.sw, r.port, r.queue_bytes);
    IBEX_TRY(open_out(dir + "/counters.csv", f));
    std::fprintf(f.get(), "t_us,cnps,pause_frames,drops,delivered_bytes\n");
    for (const sim::CounterRecord &r : sim.counter_series())
        std::fprintf(f.get(), "%.3f,%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 "\n", r.t_ns / 1e3, r.cnps,
                     r.pause_frames, r.drops, r.delivered_bytes);
    std::vector<sim::RateRecord> rates = sim.rate_series();
    std::stable_sort(rates.begin(), rates.end(),
                     [](const sim::RateRecord &a, const sim::RateRecord &b) { return a.qp < b.qp; });
    IBEX_TRY(open_out(dir + "/rates.csv", f));
    std::fprintf(f.get(), "t_us,qp,rate_gbps,delivered_bytes\n");
    for (const sim::RateRecord &r : rates)
        std::fprintf(f.get(), "%.3f,%u,%.4f,%" PRIu64 "\n", r.t_ns / 1e3, r.qp,
                     (r.rate_mbps > 0 ? r.rate_mbps : info.host_gbps * 1000) / 1e3, r.delivered_bytes);
    IBEX_TRY(open_out(dir + "/qps.csv", f));
    std::fprintf(f.get(), "qp,src,dst,delivered_bytes,first_tx_us,last_rx_us,gbps,cnps,retransmits\n");
    for (uint32_t q = 0; q < sim.qps(); ++q) {
        const sim::QpStats s = sim.qp_stats(q);
        const double span = s.last_rx_ns > s.first_tx_ns ? double(s.last_rx_ns - s.first_tx_ns) : 0;
        std::fprintf(f.get(), "%u,%u,%u,%" PRIu64 ",%.3f,%.3f,%.3f,%" PRIu64 ",%" PRIu64 "\n", q, s.src, s.dst,
                     s.delivered_bytes, s.first_tx_ns / 1e3, s.last_rx_ns / 1e3,
                     span > 0 ? double(s.delivered_bytes) * 8 / span : 0, s.cnps, s.retransmits);
    }
    if (!info.flow_messages.empty()) {
        IBEX_TRY(open_out(dir + "/flows.csv", f));
        std::fprintf(f.get(), "msg,src,dst,bytes,start_us,done_us,fct_us,gbps\n");
        for (uint32_t m : info.flow_messages) {
            const sim::MessageResult r = sim.result(m);
            const sim::QpStats s = sim.qp_stats(r.qp);
            const double fct = r.done_ns ? double(r.done_ns - r.ready_ns) : 0;
            std::fprintf(f.get(), "%u,%u,%u,%" PRIu64 ",%.3f,%.3f,%.3f,%.3f\n", m, s.src, s.dst, r.bytes,
                         r.ready_ns / 1e3, r.done_ns / 1e3, fct / 1e3, fct > 0 ? double(r.bytes) * 8 / fct : 0);
        }
    }
    return IBEX_OK;
}

ibex_status_t draw_plots(const sim::Simulator &sim, const OutputInfo &info, const std::string &dir) {
    if (std::system("command -v gnuplot >/dev/null 2>&1") != 0) {
        std::fprintf(stderr, "ibex_sim: gnuplot not found (scripts/setup.sh installs gnuplot-nox); CSVs only\n");
        return IBEX_OK;
    }
    const std::string gp = dir + "/plots.gp";
    File f;
    IBEX_TRY(open_out(gp, f));
    FILE *o = f.get();
    std::fprintf(o, "set datafile separator ','\nset terminal pngcairo size 1000,600\nset key outside right\n"
                    "set grid\nset xlabel 'time (us)'\n");
    const auto ports = deepest_ports(sim, 6);
    if (!ports.empty() && !sim.queue_series().empty()) {
        std::fprintf(o, "set output '%s/queue.png'\nset title 'deepest egress queues'\nset ylabel 'queue (KB)'\nplot ",
                     dir.c_str());
        for (size_t i = 0; i < ports.size(); ++i)
            std::fprintf(o, "%s'%s/queues.csv' every ::1 using ($2==%u && $3==%u ? $1 : 1/0):($4/1024) with lines "
                            "title 'switch %u port %u'",
                         i ? ", " : "", dir.c_str(), ports[i].sw, ports[i].port, ports[i].sw, ports[i].port);
        std::fprintf(o, "\n");
    }
    if (!sim.rate_series().empty()) {
        std::fprintf(o, "set output '%s/rates.png'\nset title 'per-QP rate (DCQCN; line rate when off)'\n"
                        "set ylabel 'Gbit/s'\nplot ", dir.c_str());
        const uint32_t n = std::min<uint32_t>(sim.qps(), 16);
        for (uint32_t q = 0; q < n; ++q)
            std::fprintf(o, "%s'%s/rates.csv' every ::1 using ($2==%u ? $1 : 1/0):3 with lines title 'qp %u'",
                         q ? ", " : "", dir.c_str(), q, q);
        std::fprintf(o, "\n");
    }
    if (!sim.counter_series().empty()) {
        std::fprintf(o, "set output '%s/feedback.png'\nset title 'CNPs and PFC pause frames sent so far'\n"
                        "set ylabel 'count'\nplot '%s/counters.csv' every ::1 using 1:2 with lines title 'CNPs', "
                        "'' every ::1 using 1:3 with lines title 'pause frames', '' every ::1 using 1:4 with lines "
                        "title 'drops'\n",
                     dir.c_str(), dir.c_str());
    }
    if (!info.flow_messages.empty()) {
        std::fprintf(o, "set output '%s/fct.png'\nset title 'flow completion time'\nset logscale xy\n"
                        "set xlabel 'flow size (bytes)'\nset ylabel 'FCT (us)'\n"
                        "plot '%s/flows.csv' every ::1 using ($7 > 0 ? $4 : 1/0):7 with points pt 7 ps 0.4 "
                        "title 'flows'\nunset logscale\n",
                     dir.c_str(), dir.c_str());
    }
    f.reset();
    const std::string cmd = "gnuplot '" + gp + "'";
    if (std::system(cmd.c_str()) != 0) return fail(IBEX_ERR_SYSTEM, "gnuplot failed on %s", gp.c_str());
    return IBEX_OK;
}

} // namespace ibex::simtool
