// The measurement on one rank: every type x op x size, out-of-place then in-place, timed
// as nccl-tests times (warm-up, then n operations back to back, time per operation
// averaged over ranks), then checked. Rank 0 prints.
#pragma once

#include <string>

#include "ibex/coll.h"
#include "tools/ibex_allreduce_perf/options.h"

namespace ibex::collperf {

// Exit status: 0 all correct, 1 some results wrong, 2 an ibex call failed.
int run_benchmark(ibex_comm_t *comm, const Options &o, const std::string &launcher);

} // namespace ibex::collperf
