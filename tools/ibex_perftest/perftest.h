// Entry points of the perftest-style tools; each tool's main() is one call.
#pragma once

namespace ibex::perftest {

int write_bw_main(int argc, char **argv);
int write_lat_main(int argc, char **argv);

} // namespace ibex::perftest
