// ibex_send_lat: SEND/RECEIVE latency between two hosts, flags and tables as perftest's
// ib_send_lat. Server: `ibex_send_lat [opts]`; client: `ibex_send_lat [opts] <server>`.
#include "tools/ibex_perftest/perftest.h"

int main(int argc, char **argv) {
    return ibex::perftest::run_tool({ibex::perftest::Verb::send, ibex::perftest::Kind::lat}, argc, argv);
}
