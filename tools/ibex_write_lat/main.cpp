// ibex_write_lat: RDMA WRITE latency between two hosts, flags and tables as perftest's
// ib_write_lat. Server: `ibex_write_lat [opts]`; client: `ibex_write_lat [opts] <server>`.
#include "tools/ibex_perftest/perftest.h"

int main(int argc, char **argv) {
    return ibex::perftest::run_tool({ibex::perftest::Verb::write, ibex::perftest::Kind::lat}, argc, argv);
}
