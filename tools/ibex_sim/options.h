// ibex_sim's command line, parsed into the simulator's, the topology's, the collective's
// and the traffic's settings.
#pragma once

#include <string>

#include "congestion/sim/simulator.h"
#include "tools/ibex_sim/collective.h"

namespace ibex::simtool {

struct Options {
    std::string topology = "leaf-spine";
    sim::FabricShape shape;
    sim::SimConfig sim;
    std::string dcqcn = "paper";
    std::string collective; // empty: none
    CollectiveSpec coll;
    std::string flows; // empty: none
    std::string out;
    bool json = false;
    bool progress = true;
    bool plots = true;
    bool help = false;
};

ibex_status_t parse_options(int argc, char **argv, Options &o);
const char *usage();

} // namespace ibex::simtool
