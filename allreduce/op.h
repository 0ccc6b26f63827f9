// One collective on a communicator's stream, and the request its caller waits on.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include <ibex/coll.h>

#include "allreduce/algorithms/algorithms.h"

// A collective's completion, shared by the caller and the progress thread; whichever lets
// go last frees it.
struct ibex_request {
    ibex_comm *comm = nullptr; // the stream it belongs to (driven by a waiting caller)
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    ibex_status_t status = IBEX_OK;
    std::string detail;
    std::atomic<int> refs{2};
    void release() {
        if (refs.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
    }
};

namespace ibex::coll {

enum class OpKind { allreduce, reduce_scatter, allgather, broadcast, reduce, barrier, probe };

const char *op_kind_name(OpKind k);

struct Op {
    OpKind kind = OpKind::allreduce;
    CollArgs args;
    ibex_request *req = nullptr;
    // A buffer this rank uses is GPU memory, so the op is staged (allreduce/gpu_staging.h)
    // before anything runs it. Asked once, at submission: the memory-type query is a driver
    // call on a GPU host, and the paths below would otherwise each ask again per op.
    bool on_gpu = false;
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

} // namespace ibex::coll
