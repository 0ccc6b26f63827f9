// ibex_read_bw: RDMA READ bandwidth between two hosts, flags and tables as perftest's
// ib_read_bw. Server: `ibex_read_bw [opts]`; client: `ibex_read_bw [opts] <server>`.
#include "tools/ibex_perftest/perftest.h"

int main(int argc, char **argv) {
    return ibex::perftest::run_tool({ibex::perftest::Verb::read, ibex::perftest::Kind::bw}, argc, argv);
}
