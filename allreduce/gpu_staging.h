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
// Consecutive staged collectives overlap their copies with each other's wire time, in two
// slots of pinned buffers used in turn. While op k runs, the input copies of op k+1 (queued
// behind it, issued without waiting) are queued already ("prefetched"); and op k is retired
// as soon as its last chunk ran: its copies back to the GPU are in flight while op k+1
// starts, and its request completes once they are done. All copies go on one stream per
// GPU, in order, so an op's input fence also covers every earlier op's results. Requests
// still complete in order: an op that is not a staged collective starts only once every
// retired op has completed. An op k+1 whose GPU input overlaps op k's GPU output is not
// prefetched (its copy must follow op k's results); nor are ops above kPrefetchMaxBytes,
// whose chunks overlap their copies with the wire already, and which take slot 0 only, so
// that pinned memory grows to twice the largest op only up to that size.
//
// A batch of sends and receives stages each message on GPU memory whole, in one chunk: its
// sends' device-to-host copies are queued at the start and the batch runs once they are
// done, on pinned copies (which the mailboxes' peers may read across processes); its
// receives land in pinned memory and go to the GPU when the batch has finished.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include <ibex/coll.h>

#include "allreduce/op.h"
#include "allreduce/step_profile.h"
#include "runtime/base/cuda_memory.h"

namespace ibex::coll {

class GpuStaging {
  public:
    static constexpr size_t kPrefetchMaxBytes = size_t(64) << 20;

    // The op has a GPU buffer on this rank (so it must be staged).
    static bool needs(const Op &op, int rank, int nranks);

    // A slot is free for op (or holds its prefetched input): begin() may run.
    bool can_begin(const ibex_comm *c, const Op &op) const;
    // Queues the device-to-host copies (unless prefetched) and rewrites op.args for the
    // first chunk.
    ibex_status_t begin(ibex_comm *c, Op &op);
    bool active() const { return running_ >= 0; }
    // The current chunk's input is in host memory (never blocks).
    bool ready();
    // The current chunk's host collective finished: queues its copy back to the GPU. *more:
    // op.args now describe the next chunk; otherwise the op waits for drained(), or is
    // retired (a collective with a request).
    ibex_status_t chunk_done(Op &op, bool *more);
    // The running op's last chunk ran and it is a collective: retire() may take it.
    bool retirable(const Op &op) const;
    // The running op's results are on their way to the GPU: its slot keeps req until they
    // are there (take it with next_completed()), and nothing runs any more.
    void retire(ibex_request *req);
    bool retired_pending() const { return retired_ > 0; }
    // The oldest retired op's request once its copies are done (never blocks), else nullptr.
    ibex_request *next_completed();
    // Every copy back to the GPU has finished (never blocks); the op is then complete.
    bool drained();
    // While an op runs: the op behind it may be prefetched now (a slot is free and it was
    // not looked at yet).
    bool may_prefetch() const;
    // Looks at next (the op queued behind the running one): queues its input copies into the
    // free slot when it may (see above); either way, the running op looks no further.
    void prefetch(ibex_comm *c, const Op &next);
    uint64_t prefetched() const { return prefetched_ops_; }
    // The op failed or the communicator stops: waits out the copies in flight (they touch
    // the pinned buffers) and forgets the op.
    void abandon();
    // The communicator enters its error state or stops: drops a prefetch (its op is failed
    // with the queue) and waits out the retired ops' copies; their requests, whose
    // collectives succeeded, come back in order for the caller to complete.
    void settle(std::vector<ibex_request *> *completed);
    // Frees the pinned buffers (at communicator teardown, after abandon() and settle()).
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
        size_t at; // in send or recv
        size_t bytes;
        size_t index; // in the op's pieces
    };
    enum class SlotState : uint8_t { free, prefetched, running, retired };
    struct Slot {
        SlotState state = SlotState::free;
        Pinned send, recv;
        CollArgs orig;
        bool has_send = false, has_recv = false;     // this rank uses the side
        bool stage_send = false, stage_recv = false; // ... and it is GPU memory
        int recv_device = -1;                        // ... on this GPU (asked once per op, not per chunk)
        std::vector<Chunk> chunks;
        size_t next = 0;                 // the chunk that runs (or waits for its input)
        std::vector<StagedPiece> pieces; // a batch's (else empty)
        ibex_request *req = nullptr;     // prefetched: whose op (never dereferenced); retired: to complete
        uint64_t retired_seq = 0;
    };
    static bool results_done(Slot &s);
    static void drop_copies(Slot &s);
    ibex_status_t grow(ibex_comm *c, Pinned &b, size_t bytes);
    void point_at(Op &op, const Slot &s, const Chunk &k) const;
    // Cuts op into chunks in s and queues the input copies.
    ibex_status_t stage(ibex_comm *c, Slot &s, const Op &op);
    ibex_status_t begin_batch(ibex_comm *c, Slot &s, Op &op);
    int slot_for(size_t bytes) const;
    // The slot holding op's prefetched input, or -1.
    int prefetched_for(const Op &op) const;
    // The retired slot whose op finished first, or nullptr.
    Slot *oldest_retired();

    Slot slots_[2];
    int running_ = -1;          // the slot of the running op
    int last_ = 1;              // the slot the last op began in
    int retired_ = 0;           // slots retired
    uint64_t retired_seq_ = 0;  // retirement order
    bool looked_ahead_ = false; // the running op has looked at the op behind it
    // IBEX_GPU_STAGING_PROFILE=1: per op, queuing the input copies (growing the pinned
    // buffers when they are too small: the first op's registration lands here; near 0 for
    // a prefetched op), the waits for each chunk's input to reach host memory (after the
    // previous chunk's collective, or the queuing), the chunks' host collectives, and the
    // queuing of the last results back to the GPU (a batch: the wait for them); written to
    // stderr when the communicator closes (release()).
    StepProfile profile_;
    bool profile_started_ = false;
    bool input_lapped_ = false; // this chunk's input wait is counted
    uint64_t profiled_chunks_ = 0;
    uint64_t prefetched_ops_ = 0;
};

} // namespace ibex::coll
