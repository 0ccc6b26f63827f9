// ibex_allreduce_perf and its twins (ibex_reduce_scatter_perf, ibex_allgather_perf,
// ibex_broadcast_perf, ibex_reduce_perf, ibex_alltoall_perf, ibex_sendrecv_perf): one program; the name picks the default
// collective, as nccl-tests' separate binaries do. See README.md.
#include <cstdio>
#include <cstring>

#include "tools/ibex_allreduce_perf/launch.h"
#include "tools/ibex_allreduce_perf/options.h"

#ifndef IBEX_PERF_DEFAULT_COLL
#define IBEX_PERF_DEFAULT_COLL allreduce
#endif

int main(int argc, char **argv) {
    using namespace ibex::collperf;
    Options o;
    const std::string err = parse_options(argc, argv, Coll::IBEX_PERF_DEFAULT_COLL, &o);
    const char *prog = std::strrchr(argv[0], '/') ? std::strrchr(argv[0], '/') + 1 : argv[0];
    if (!err.empty()) {
        std::fprintf(stderr, "%s: %s\n", prog, err.c_str());
        return 2;
    }
    if (o.help) {
        print_usage(prog);
        return 0;
    }
    return launch(o);
}
