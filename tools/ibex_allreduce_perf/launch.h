// How the ranks come to be: forked here (-np N, one host), started by a launcher (mpirun,
// srun, torchrun, or IBEX_RANK/IBEX_NRANKS in the environment), or a single rank.
#pragma once

#include "tools/ibex_allreduce_perf/options.h"

namespace ibex::collperf {

// Runs the benchmark on every rank this process is responsible for; returns the exit
// status (the worst of the ranks' when forking).
int launch(const Options &o);

} // namespace ibex::collperf
