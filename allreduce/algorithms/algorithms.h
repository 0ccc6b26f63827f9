// Schedule builders, one algorithm per file, and the peers each one talks to (the
// communicator connects exactly the union of those).
#pragma once

#include <cstddef>
#include <vector>

#include "allreduce/schedule.h"

namespace ibex::coll {

struct CollArgs {
    const void *sendbuf = nullptr;
    void *recvbuf = nullptr;
    size_t count = 0; // allreduce/broadcast/reduce: count; reduce_scatter: recvcount; allgather: sendcount
    ibex_datatype_t type = IBEX_U8;
    ibex_redop_t op = IBEX_SUM;
    int root = 0;
    int rank = 0;
    int nranks = 1;
    void *scratch = nullptr; // at least scratch_bytes() bytes, registered
};

// Elements [off, off + len) of chunk c when count elements are cut into n nearly equal
// chunks (the first count % n chunks one element longer).
void chunk_range(size_t count, int n, int c, size_t *off, size_t *len);

// ring.cpp: reduce-scatter then allgather around the ring, chunked and pipelined.
void build_ring_allreduce(const CollArgs &a, ScheduleBuilder &b);
void build_ring_reduce_scatter(const CollArgs &a, ScheduleBuilder &b); // partials in scratch
void build_ring_allgather(const CollArgs &a, ScheduleBuilder &b);
std::vector<int> ring_peers(int rank, int n);

// rhd.cpp: recursive halving (reduce-scatter) and doubling (allgather), Rabenseifner,
// with the non-power-of-two fix-up (the first 2 * (n - 2^k) ranks pair up first).
void build_rhd_allreduce(const CollArgs &a, ScheduleBuilder &b);
std::vector<int> rhd_peers(int rank, int n);
int rhd_steps(int n); // log2 of the largest power of two <= n

// tree.cpp: double binary tree (two complementary trees, each carrying half the data:
// reduce up, broadcast down, pipelined by slices).
struct TreeLinks {
    int parent = -1;
    int child[2] = {-1, -1};
};
TreeLinks tree_links(int tree, int rank, int n);
int tree_depth(int n);
void build_tree_allreduce(const CollArgs &a, ScheduleBuilder &b);
std::vector<int> tree_peers(int rank, int n);

// chain.cpp: broadcast and reduce as pipelined chains along the ring (from the root /
// ending at the root).
void build_chain_broadcast(const CollArgs &a, ScheduleBuilder &b);
void build_chain_reduce(const CollArgs &a, ScheduleBuilder &b); // partials in scratch

} // namespace ibex::coll
