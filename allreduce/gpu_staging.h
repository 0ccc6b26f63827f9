// Collectives on GPU buffers, staged through pinned host memory at the collective level:
// the transports (shm, udp, dpdk) and the executor only ever see host memory.
//
// An allreduce, broadcast or reduce is cut into chunks (at least IBEX_GPU_CHUNK bytes,
// 4 MiB by default, and at most 16 chunks). At the start every chunk's device-to-host copy is queued on the library's copy
// stream, each with its own fence; chunk k runs as an ordinary host collective as soon as
// its copy is done, while the copies behind it proceed; its result goes back with a
// host-to-device copy queued when it finishes, overlapping chunk k+1 on the wire. So the
// first bytes leave after one chunk's copy, not the whole buffer's, and the reduction runs
// where the staged data is: in host memory, on the CPU kernels. Reduce-scatter and
// allgather move per-rank blocks that do not cut into contiguous chunks: they stage the
// whole buffer (still one copy each way, no GPU round trips per step).
//
// A buffer that is host memory is used as it is; only the GPU side is staged. The pinned
// buffers are the communicator's, grown on demand, and registered with its caches.
//
// A batch of sends and receives stages each message on GPU memory whole, in one chunk: its
// sends' device-to-host copies are queued at the start and the batch runs once they are
// done, on pinned copies (which the mailboxes' peers may read across processes); its
// receives land in pinned memory and go to the GPU when the batch has finished.
#pragma once

#include <cstddef>
#include <vector>

#include <ibex/coll.h>

#include "allreduce/op.h"
#include "allreduce/step_profile.h"
#include "runtime/base/cuda_memory.h"

namespace ibex::coll {

class GpuStaging {
  public:
    // The op has a GPU buffer on this rank (so it must be staged).
    static bool needs(const Op &op, int rank, int nranks);

    // Queues the device-to-host copies and rewrites op.args for the first chunk.
    ibex_status_t begin(ibex_comm *c, Op &op);
    bool active() const { return active_; }
    // The current chunk's input is in host memory (never blocks).
    bool ready();
    // The current chunk's host collective finished: queues its copy back to the GPU. *more:
    // op.args now describe the next chunk; otherwise the op waits for drained().
    ibex_status_t chunk_done(Op &op, bool *more);
    // Every copy back to the GPU has finished (never blocks); the op is then complete.
    bool drained();
    // The op failed or the communicator stops: waits out the copies in flight (they touch
    // the pinned buffers) and forgets the op.
    void abandon();
    // Frees the pinned buffers (at communicator teardown, after abandon()).
    void release(ibex_comm *c);

  private:
    struct Chunk {
        size_t send_off = 0, send_len = 0; // bytes, in the send buffer
        size_t recv_off = 0, recv_len = 0; // bytes, in the receive buffer
        size_t count = 0;                  // the chunk's count argument
        cuda::CopyFence in, out;
    };
    struct Pinned {
        void *p = nullptr;
        size_t bytes = 0;
    };
    // A batch's message on GPU memory and where it is staged.
    struct StagedPiece {
        bool send;
        uint8_t *gpu;
        size_t at; // in send_ or recv_
        size_t bytes;
        size_t index; // in the op's pieces
    };
    ibex_status_t grow(ibex_comm *c, Pinned &b, size_t bytes);
    void point_at(Op &op, const Chunk &k) const;
    ibex_status_t begin_batch(ibex_comm *c, Op &op);

    bool active_ = false;
    CollArgs orig_;
    bool has_send_ = false, has_recv_ = false;     // this rank uses the side
    bool stage_send_ = false, stage_recv_ = false; // ... and it is GPU memory
    std::vector<Chunk> chunks_;
    size_t next_ = 0; // the chunk that runs (or waits for its input)
    Pinned send_, recv_;
    std::vector<StagedPiece> pieces_; // a batch's (else empty)
    // IBEX_GPU_STAGING_PROFILE=1: per op, queuing the input copies (growing the pinned
    // buffers when they are too small: the first op's registration lands here), the waits
    // for each chunk's input to reach host memory (after the previous chunk's collective,
    // or the queuing), the chunks' host collectives, and the wait for the last results to
    // reach the GPU; written to stderr when the communicator closes (release()).
    StepProfile profile_;
    bool profile_started_ = false;
    bool input_lapped_ = false; // this chunk's input wait is counted
    uint64_t profiled_chunks_ = 0;
};

} // namespace ibex::coll
