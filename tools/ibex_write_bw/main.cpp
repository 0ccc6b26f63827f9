// ibex_write_bw: RDMA WRITE bandwidth between two hosts, flags and tables as perftest's
// ib_write_bw. Server: `ibex_write_bw [opts]`; client: `ibex_write_bw [opts] <server>`.
#include "tools/ibex_perftest/perftest.h"

int main(int argc, char **argv) {
    return ibex::perftest::run_tool({ibex::perftest::Verb::write, ibex::perftest::Kind::bw}, argc, argv);
}
