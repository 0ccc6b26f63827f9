// What ibex_sim writes to --out DIR: CSV files (ports, queues over time, per-QP rates
// over time, CNPs / pause frames / drops over time, per-QP totals, per-flow completion
// times) and PNG plots drawn by gnuplot.
#pragma once

#include <string>
#include <vector>

#include "congestion/sim/simulator.h"

namespace ibex::simtool {

struct OutputInfo {
    std::vector<uint32_t> flow_messages; // per-flow FCT rows (empty: none written)
    double host_gbps = 100;
};

ibex_status_t write_csvs(const sim::Simulator &sim, const OutputInfo &info, const std::string &dir);
// Draws queue.png (the deepest egress queues over time), rates.png (per-QP DCQCN rates),
// feedback.png (CNPs, pause frames, drops over time) and, with flows, fct.png (completion time against size). Without gnuplot it says so on
// stderr and returns IBEX_OK: the CSVs are the result.
ibex_status_t draw_plots(const sim::Simulator &sim, const OutputInfo &info, const std::string &dir);

} // namespace ibex::simtool
