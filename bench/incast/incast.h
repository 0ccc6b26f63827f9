// The N-to-1 incast scenario through the switch, in one process: N sender contexts each
// stream RDMA WRITEs on one QP to one receiver context, every packet crossing a Switch
// whose receiver-facing egress port is the bottleneck. Used by `ibex_switch --incast`,
// the end-to-end test and bench/incast. Only the public C API drives the endpoints.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tools/ibex_switch/switch.h"

namespace ibex::sw {

struct IncastConfig {
    int senders = 4;
    double seconds = 4;
    std::string dcqcn = "off";    // context attribute: off, paper, mlx5
    double line_rate_mbps = 0;    // DCQCN line rate; 0: the switch's link rate
    uint32_t message_bytes = 65536;
    int outstanding = 16;         // WRITEs in flight per sender
    SwitchConfig sw;
};

struct FlowResult {
    double mbps_last_half = 0; // received through the bottleneck in the last half
    uint64_t bytes = 0;
    double rate_mbps = 0;      // DCQCN's current rate at the end (0 without DCQCN)
    double alpha = 0;
    uint64_t cnps_handled = 0;
    uint64_t completed = 0;    // WRITEs completed
    uint64_t errors = 0;       // completions with an error status
};

// DCQCN's view of the flows, sampled by the harness while it runs.
struct RateSample {
    double t_s;
    std::vector<double> rate_mbps; // per sender: current rate Rc
    std::vector<double> alpha;
};

struct IncastResult {
    bool ok = false;
    std::vector<RateSample> rates;
    std::string error;
    std::vector<FlowResult> flows;
    double utilisation = 0;       // bottleneck tx / link rate over the last half
    double jain_last_half = 0;
    uint64_t queue_p99_bytes = 0; // of the bottleneck queue samples (whole run)
    uint64_t queue_max_bytes = 0;
    // The same over the last half, after the start-up transient (every flow starts at
    // line rate): where DCQCN's steady state shows.
    uint64_t queue_p90_last_half = 0;
    uint64_t queue_p99_last_half = 0;
    uint64_t drops = 0;           // bottleneck tail drops
    uint64_t drops_last_half = 0;
    uint64_t marks = 0;
    uint64_t cnps_sent = 0;       // by the receiver (notification point)
    uint64_t retransmitted = 0;   // by the senders
    double switch_stalled_ms = 0; // Switch::stalled_ns(): the host, not the fabric
    Switch *sw = nullptr;         // valid until the result is destroyed
    std::shared_ptr<Switch> owner;
};

IncastResult run_incast(const IncastConfig &cfg);

// Jain's fairness index of the values (1 = equal shares).
double jain_index(const std::vector<double> &x);

std::string format_result(const IncastConfig &cfg, const IncastResult &r);

} // namespace ibex::sw
