// Flow traffic for the simulator, from a --flows spec:
//   long            every host i sends one endless flow to host (i + hosts/2) % hosts
//                   (a permutation across the fabric's bisection); needs --duration-us
//   incast:N[:S]    hosts 1..N each send S bytes (default 64 MiB) to host 0 at once
//   cdf:FILE[:L]    Poisson arrivals at load L (default 0.5) of every host's link, random
//                   destinations, sizes drawn from FILE (lines `bytes cumulative_probability`,
//                   probabilities in [0, 1] or percent, as HPCC's traffic generator reads);
//                   needs --duration-us
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "congestion/sim/simulator.h"

namespace ibex::simtool {

struct FlowPlan {
    std::string kind; // long, incast, cdf
    std::vector<uint32_t> messages;
    bool endless = false; // runs to --duration-us
};

ibex_status_t add_flows(sim::Simulator &sim, const std::string &spec, double host_gbps, uint64_t duration_ns,
                        uint64_t seed, FlowPlan &plan);

// A CDF as HPCC's traffic generator reads it: (bytes, cumulative probability) rising to 1.
struct SizeCdf {
    std::vector<std::pair<double, double>> points;
    double mean() const;
    double sample(double u) const; // u uniform in [0, 1)
};
ibex_status_t parse_cdf(const std::string &text, SizeCdf &out);

// "64M", "1G", "4096", "1.5K" -> bytes (powers of 1024).
bool parse_size(const std::string &s, uint64_t *out);

} // namespace ibex::simtool
