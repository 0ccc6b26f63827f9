// ibex_atomic_bw: atomic fetch-and-add / compare-and-swap bandwidth between two hosts, flags and tables as perftest's
// ib_atomic_bw. Server: `ibex_atomic_bw [opts]`; client: `ibex_atomic_bw [opts] <server>`.
#include "tools/ibex_perftest/perftest.h"

int main(int argc, char **argv) {
    return ibex::perftest::run_tool({ibex::perftest::Verb::atomic, ibex::perftest::Kind::bw}, argc, argv);
}
