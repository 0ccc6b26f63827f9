// Command line of ibex_allreduce_perf (and its per-collective twins): nccl-tests' flags
// with nccl-tests' meanings and defaults, plus the launch and device options ibex needs.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "ibex/coll.h"

namespace ibex::collperf {

enum class Coll { allreduce, reduce_scatter, allgather, broadcast, reduce, alltoall, sendrecv };

const char *coll_name(Coll c);
bool coll_reduces(Coll c); // has a reduction op (allreduce, reduce_scatter, reduce)
bool coll_rooted(Coll c);  // has a root (broadcast, reduce)
// The size is every rank's share together (nccl-tests' count is the total): allgather,
// reduce_scatter, alltoall.
bool coll_split(Coll c);
bool coll_in_place(Coll c); // has an in-place form (alltoall and sendrecv have none)
// busbw = algbw x this (nccl-tests' factors): 2(n-1)/n for allreduce, (n-1)/n for
// reduce_scatter, allgather and alltoall, 1 for broadcast, reduce and sendrecv.
double bus_factor(Coll c, int nranks);

struct Options {
    Coll coll = Coll::allreduce;
    size_t min_bytes = 32u << 20;  // -b
    size_t max_bytes = 32u << 20;  // -e
    size_t step_bytes = 1u << 20;  // -i (used when -f is 1)
    size_t step_factor = 1;        // -f
    int iters = 20;                // -n
    int warmup = 1;                // -w
    int check = 1;                 // -c: 0 skips the correctness check (#wrong N/A)
    std::vector<ibex_datatype_t> types{IBEX_F32}; // -d
    std::vector<ibex_redop_t> ops{IBEX_SUM};      // -o
    int root = 0;                  // -r
    int blocking = 0;              // -z: 1 waits for each operation before the next
    int average = 1;               // -a: time reported is 0 rank 0's, 1 the mean, 2 min, 3 max
    int nprocs = 0;                // -np: fork this many local ranks (0: launcher or 1 rank)
    bool bind = true;              // --bind core|none: pin -np ranks to a core each when they fit
    int ranks_per_host = 0;        // --ranks_per_host: -np ranks r / n named one host each (0: one host)
    std::string device;            // --device (empty: IBEX_DEVICE, else the first listed);
                                   // "{rank}" in it becomes each rank's number
    std::string algo;              // --algo ring|rhd|tree|hierarchical (allreduce)
    int timeout_ms = 0;            // -T seconds, as ms (0: IBEX_TIMEOUT_MS / 30 s)
    bool gpu = false;              // -G 1 / --mem cuda: buffers in GPU memory
    bool shared = false;           // -R 1: buffers from ibex_comm_mem_alloc (peers map them)
    bool json = false;             // --json[=FILE]
    std::string json_path;         // empty: JSON alone on stdout, the table on stderr
    bool help = false;
};

// Fills *out from argv. The default collective comes from the program's name
// (ibex_allgather_perf, ...) unless --coll says otherwise. Returns "" or the reason argv is
// not valid (one line, naming the flag).
std::string parse_options(int argc, char **argv, Coll default_coll, Options *out);
void print_usage(const char *prog);

// device with every "{rank}" replaced by rank, so ranks that need their own port (a DPDK
// af_packet interface each, say) can share one --device.
std::string device_for_rank(const std::string &device, int rank);

// "8", "64K", "1M", "2G" (powers of 1024, as nccl-tests reads them). false if malformed.
bool parse_size(const char *s, size_t *out);

} // namespace ibex::collperf
