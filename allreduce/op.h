// One collective on a communicator's stream, and the request its caller waits on.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <ibex/coll.h>

#include "allreduce/algorithms/algorithms.h"
#include "allreduce/request.h"
#include "allreduce/selector.h"

namespace ibex::coll {

enum class OpKind { allreduce, reduce_scatter, allgather, broadcast, reduce, barrier, probe, alltoall, alltoallv, p2p };

const char *op_kind_name(OpKind k);

struct Op {
    OpKind kind = OpKind::allreduce;
    CollArgs args;
    ibex_request *req = nullptr;
    // A buffer this rank uses is GPU memory, so the op is staged (allreduce/gpu_staging.h)
    // before anything runs it. Asked once, at submission: the memory-type query is a driver
    // call on a GPU host, and the paths below would otherwise each ask again per op.
    bool on_gpu = false;
    // Some rank's GPU buffers could not be mapped by its peers (allreduce/gpu_direct.h):
    // the op is staged instead, on every rank.
    bool gpu_direct_refused = false;
    // allreduce only: run this algorithm, not the cost model's choice or IBEX_ALGO's
    // (calibration times the hierarchical schedule itself). Always scheduled.
    std::optional<Algo> algo;
    // alltoallv only: sendcounts, sdispls, recvcounts, rdispls, nranks each, in elements
    // (copied from the caller's arrays; args.count is the elements sent and received).
    std::vector<size_t> blocks;
    // p2p only: the batch's sends and receives in the caller's order (zero-length ones left
    // out; args.count is their bytes, args.type IBEX_U8).
    std::vector<P2pPiece> pieces;
    // probe only
    int pings = 0;
    size_t bulk = 0;
    int partner = -1; // -1: this rank sits the probe out
    std::vector<uint64_t> *times = nullptr;
};

// The bytes an op reads from its send buffer and writes to its receive buffer on this rank
// (0 for a buffer the rank does not use; barrier and probe: none), and whether it works
// element by element, so that it may run chunk by chunk.
struct OpBytes {
    size_t send = 0, recv = 0;
    bool elementwise = false;
};
OpBytes op_bytes(const Op &op, int rank, int nranks);

// alltoallv's arrays in Op::blocks.
struct AlltoallvBlocks {
    std::span<const size_t> sendcounts, sdispls, recvcounts, rdispls;
};
AlltoallvBlocks alltoallv_blocks(const Op &op, int nranks);

// An op's call as one word, type | reduction op << 8 | kind << 16 (the reduction op only
// where the collective reduces), for ranks to compare what each of them called.
uint32_t call_word(const Op &op);
// The error for rank q having called (call, count, root) where this rank called (my_*).
ibex_status_t call_mismatch(int q, uint32_t call, uint64_t count, int root, uint32_t my_call, uint64_t my_count,
                            int my_root);
// Every rank's announcement (with count, call and root) names this rank's call; else the
// mismatch error for the first that does not.
template <class Announce> ibex_status_t check_same_call(const std::vector<Announce> &all, const Announce &mine) {
    for (size_t q = 0; q < all.size(); ++q) {
        const Announce &t = all[q];
        if (t.count != mine.count || t.call != mine.call || t.root != mine.root)
            return call_mismatch(static_cast<int>(q), t.call, t.count, t.root, mine.call, mine.count, mine.root);
    }
    return IBEX_OK;
}

} // namespace ibex::coll
