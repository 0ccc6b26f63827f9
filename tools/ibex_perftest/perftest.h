// Entry point of the perftest-style tools: each tool's main() is one call naming its verb
// and kind; the bandwidth runner (bw.cpp) and the latency runner (lat.cpp) serve all verbs.
#pragma once

#include "tools/ibex_perftest/options.h"

namespace ibex::perftest {

// Parses the command line and runs the test; returns the process exit status.
int run_tool(Test t, int argc, char **argv);

int run_bw(const Options &o);
int run_lat(const Options &o);

} // namespace ibex::perftest
