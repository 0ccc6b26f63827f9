// ibex_read_lat: RDMA READ latency between two hosts, flags and tables as perftest's
// ib_read_lat. Server: `ibex_read_lat [opts]`; client: `ibex_read_lat [opts] <server>`.
#include "tools/ibex_perftest/perftest.h"

int main(int argc, char **argv) {
    return ibex::perftest::run_tool({ibex::perftest::Verb::read, ibex::perftest::Kind::lat}, argc, argv);
}
