// A collective on the simulated fabric: the schedules allreduce/algorithms builds for every
// rank, turned into the engine's messages with the same dependencies the executor honours
// (allreduce/schedule.h): the i-th send from rank r to rank p is the i-th receive of p
// from r, one message on the QP of that rank pair; a message starts when the send's
// dependencies and the receive's (the receiver announces its buffer) are done; a step is
// done when its message is, a reduction also when its apply_dep is, a local copy when its
// dependencies are. Transfers are sliced exactly as the runtime slices them.
#pragma once

#include <functional>

#include <cstdint>
#include <string>
#include <vector>

#include "allreduce/algorithms/algorithms.h"
#include "allreduce/selector.h"
#include "congestion/sim/simulator.h"

namespace ibex::simtool {

struct CollectiveSpec {
    std::string algo = "ring"; // ring, rhd, tree, hierarchical, bigraph, gdraa
    uint64_t bytes = 1 << 20;
    uint32_t ranks_per_host = 1;
    std::string placement = "linear"; // linear, strided, random
    size_t slice_bytes = 128 << 10;   // IBEX_COMM_SLICE's default off the udp port
    uint64_t seed = 1;
    // bigraph: the fabric is ibex_sim's BiGraph with this many hosts on each switch (its
    // host numbering: blocks alternately on upper and lower switch i); 0: not a BiGraph.
    uint32_t bigraph_per_switch = 0;
};

struct CollectivePlan {
    uint32_t ranks = 0;
    std::vector<uint32_t> host_of_rank;
    std::vector<uint32_t> messages; // every message of the collective
};

using ScheduleFn = std::function<void(const coll::CollArgs &, coll::ScheduleBuilder &)>;
// The builder for an algorithm name over ranks placed on hosts as `host_of_rank` says;
// empty (with the reason in ibex_last_error()) for an unknown name, for "hierarchical"
// on a placement it does not apply to (hosts with different numbers of ranks), or for
// "bigraph" off a BiGraph fabric it can map contention-free (bigraph_per_switch: 0).
ScheduleFn schedule_builder(const std::string &algo, const std::vector<uint32_t> &host_of_rank,
                            uint32_t bigraph_per_switch = 0);

// Adds the collective's messages to `sim`.
ibex_status_t add_collective(sim::Simulator &sim, const CollectiveSpec &spec, CollectivePlan &plan);

// When the collective finished (the last message done) and its bus bandwidth,
// busbw = bytes / time x 2(n-1)/n (nccl-tests' allreduce convention), in Gbit/s.
double collective_seconds(const sim::Simulator &sim, const CollectivePlan &plan);
double busbw_gbps(uint64_t bytes, uint32_t ranks, double seconds);

} // namespace ibex::simtool

namespace ibex::simtool {

// The cost model allreduce/selector would calibrate on this fabric when it is idle: alpha
// the one-way time of a small message between ranks 0 and 1 (the probe's pair), beta the
// time per byte at host 0's link rate less the per-packet headers, gamma 0 (the
// simulator does not model reduction time).
coll::CostModel fabric_cost_model(const sim::Simulator &sim, const CollectivePlan &plan, uint32_t mtu,
                                  uint32_t header_bytes);

} // namespace ibex::simtool
