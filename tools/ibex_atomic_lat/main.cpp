// ibex_atomic_lat: atomic fetch-and-add / compare-and-swap latency between two hosts, flags and tables as perftest's
// ib_atomic_lat. Server: `ibex_atomic_lat [opts]`; client: `ibex_atomic_lat [opts] <server>`.
#include "tools/ibex_perftest/perftest.h"

int main(int argc, char **argv) {
    return ibex::perftest::run_tool({ibex::perftest::Verb::atomic, ibex::perftest::Kind::lat}, argc, argv);
}
