#include "tools/ibex_allreduce_perf/report.h"

namespace ibex::collperf {

Result make_result(Coll c, int nranks, size_t bytes, double time_us, long long wrong) {
    Result r;
    r.time_us = time_us;
    r.algbw = time_us > 0 ? static_cast<double>(bytes) / (time_us * 1e3) : 0.0; // bytes/us/1e3 = GB/s
    r.busbw = r.algbw * bus_factor(c, nranks);
    r.wrong = wrong;
    return r;
}

void print_header(FILE *f) {
    std::fprintf(f, "#\n");
    std::fprintf(f, "# %10s  %12s  %8s  %6s  %6s  %35s  %35s\n", "", "", "", "", "", "out-of-place", "in-place");
    std::fprintf(f, "# %10s  %12s  %8s  %6s  %6s  %8s  %7s  %7s  %6s  %8s  %7s  %7s  %6s\n", "size", "count", "type",
                 "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong");
    std::fprintf(f, "# %10s  %12s  %8s  %6s  %6s  %8s  %7s  %7s  %6s  %8s  %7s  %7s  %6s\n", "(B)", "(elements)", "",
                 "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
}

namespace {
void print_result(FILE *f, const Result &r) {
    if (!r.ran) {
        std::fprintf(f, "  %8s  %7s  %7s  %6s", "N/A", "N/A", "N/A", "N/A");
        return;
    }
    // Long times lose their decimals so the column keeps its width.
    if (r.time_us >= 10000.0) std::fprintf(f, "  %8.0f", r.time_us);
    else std::fprintf(f, "  %8.2f", r.time_us);
    std::fprintf(f, "  %7.2f  %7.2f", r.algbw, r.busbw);
    if (r.wrong < 0) std::fprintf(f, "  %6s", "N/A");
    else std::fprintf(f, "  %6lld", r.wrong);
}
} // namespace

void print_row(FILE *f, const Row &r) {
    std::fprintf(f, "  %10zu  %12zu  %8s  %6s  %6d", r.bytes, r.count, ibex_datatype_name(r.type),
                 r.has_op ? ibex_redop_name(r.op) : "none", r.root);
    print_result(f, r.oop);
    print_result(f, r.ip);
    std::fprintf(f, "\n");
    std::fflush(f);
}

double average_busbw(const std::vector<Row> &rows) {
    double sum = 0;
    size_t n = 0;
    for (const Row &r : rows)
        for (const Result *x : {&r.oop, &r.ip})
            if (x->ran) {
                sum += x->busbw;
                ++n;
            }
    return n ? sum / static_cast<double>(n) : 0.0;
}

void print_footer(FILE *f, const std::vector<Row> &rows, long long total_wrong, bool checked) {
    if (checked) std::fprintf(f, "# Out of bounds values : %lld %s\n", total_wrong, total_wrong ? "FAILED" : "OK");
    else std::fprintf(f, "# Out of bounds values : N/A (-c 0)\n");
    std::fprintf(f, "# Avg bus bandwidth    : %g \n", average_busbw(rows));
    std::fprintf(f, "#\n");
    std::fflush(f);
}

namespace {
void json_result(FILE *f, const char *name, const Result &r) {
    if (!r.ran) {
        std::fprintf(f, "\"%s\": null", name);
        return;
    }
    // %.9g, not fixed decimals: a slow 8-byte operation's algbw is far below 1e-6 GB/s and must not read as 0.
    std::fprintf(f, "\"%s\": {\"time_us\": %.9g, \"algbw_GBps\": %.9g, \"busbw_GBps\": %.9g, \"wrong\": ", name,
                 r.time_us, r.algbw, r.busbw);
    if (r.wrong < 0) std::fprintf(f, "null}");
    else std::fprintf(f, "%lld}", r.wrong);
}
} // namespace

void write_json(FILE *f, const RunInfo &info, const std::vector<Row> &rows) {
    const Options &o = *info.opts;
    std::fprintf(f,
                 "{\"tool\": \"ibex_allreduce_perf\", \"collective\": \"%s\", \"nranks\": %d, \"launcher\": \"%s\", "
                 "\"device\": \"%s\", \"reduce_isa\": \"%s\", \"iters\": %d, \"warmup_iters\": %d, \"check\": %d, "
                 "\"memory\": \"%s\", \"bus_factor\": %.6f, \"results\": [",
                 coll_name(info.coll), info.nranks, info.launcher.c_str(), info.device.c_str(), info.reduce_isa.c_str(),
                 o.iters, o.warmup, o.check, o.gpu ? "cuda" : o.shared ? "host-shared" : "host", bus_factor(info.coll, info.nranks));
    for (size_t i = 0; i < rows.size(); ++i) {
        const Row &r = rows[i];
        std::fprintf(f, "%s\n  {\"size\": %zu, \"count\": %zu, \"type\": \"%s\", \"redop\": \"%s\", \"root\": %d, ",
                     i ? "," : "", r.bytes, r.count, ibex_datatype_name(r.type), r.has_op ? ibex_redop_name(r.op) : "none",
                     r.root);
        if (!r.algo.empty()) std::fprintf(f, "\"algo\": \"%s\", ", r.algo.c_str());
        json_result(f, "out_of_place", r.oop);
        std::fprintf(f, ", ");
        json_result(f, "in_place", r.ip);
        std::fprintf(f, "}");
    }
    std::fprintf(f, "\n], \"avg_busbw_GBps\": %.9g}\n", average_busbw(rows));
    std::fflush(f);
}

} // namespace ibex::collperf
