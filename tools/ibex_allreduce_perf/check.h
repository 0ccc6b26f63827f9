// Input patterns and expected results for the #wrong column. Every rank can compute any
// rank's input, so each rank checks its own output without moving data. The values are
// small integers (and +-1/2 for prod), so sums and products are exact in every type and
// any accumulation order: a correct collective gives exactly the expected bits.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ibex/coll.h"
#include "tools/ibex_allreduce_perf/options.h"

namespace ibex::collperf {

// Rank `rank`'s input element at index i (the index within the whole send buffer).
void fill_input(void *buf, size_t count, ibex_datatype_t type, ibex_redop_t op, int rank, size_t first_index = 0);

struct CheckSpec {
    Coll coll;
    ibex_datatype_t type;
    ibex_redop_t op;
    int rank;
    int nranks;
    int root;
    size_t count; // elements per rank's result: allreduce/broadcast/reduce count, allgather
                  // and alltoall nranks*sendcount, reduce_scatter recvcount
};

// Elements of out that differ from what `spec` should produce on this rank (0 where this
// rank has no result: reduce on a non-root rank).
int64_t count_wrong(const void *out, const CheckSpec &spec);

} // namespace ibex::collperf
