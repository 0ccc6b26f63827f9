// ibex_send_bw: SEND/RECEIVE bandwidth between two hosts, flags and tables as perftest's
// ib_send_bw. Server: `ibex_send_bw [opts]`; client: `ibex_send_bw [opts] <server>`.
#include "tools/ibex_perftest/perftest.h"

int main(int argc, char **argv) {
    return ibex::perftest::run_tool({ibex::perftest::Verb::send, ibex::perftest::Kind::bw}, argc, argv);
}
