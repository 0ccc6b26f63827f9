// The stream driver: runs a communicator's FIFO of collectives. Whoever holds the
// communicator's drive lock drives: a caller blocked in ibex_wait (or a blocking
// collective) takes it and runs the stream itself, as MPI and NCCL's proxy-less paths do,
// so a small collective costs no thread hand-offs; otherwise the progress thread runs it in
// the background. Both busy-poll only briefly, then sleep on the CQ's descriptor, the
// bootstrap sockets and a wake-up eventfd, so many ranks can share few cores.
#pragma once

#include <chrono>
#include <utility>

#include <ibex/coll.h>

#include "allreduce/op.h"

namespace ibex::coll {

// What the stream's driver keeps between passes; only the holder of drive_mu touches it.
struct DriveState {
    Op op;
    bool have = false; // op is the running one
    bool taken = false; // ... taken off the queue, not yet looked at by a pass
    bool fast = false;  // ... and it runs over the fast boxes (allreduce/fastbox.h), not the executor
    // With ibex_comm::gpu active, op.args are the running chunk's host copies (GPU buffers).
    bool gpu_draining = false; // ... a batch: it ran; its copies back to the GPU are in flight
    bool scheduled = false;    // the op (or GPU chunk) runs the scheduled way: direct fell back
    unsigned idle_passes = 0;
    unsigned quiet_passes = 0; // looks at the fast boxes that found nothing new
    std::chrono::steady_clock::time_point last_activity, last_move, last_boot_check;
    // Something moved (or also counts as activity) since the stamps: the next pass that
    // reads the clock stamps them. A small collective that finishes at once reads no clock,
    // which would otherwise be a tenth of its time; the stamps come at most one idle pass
    // late, which only lengthens a spin or a timeout by that pass.
    bool moved_unstamped = false, active_unstamped = false;
    // The clock read by the idle pass that just ended, for the drive_idle after it (one
    // read per idle pass, not three); taken by that drive_idle, or by none.
    std::chrono::steady_clock::time_point idle_pass_now;
    bool idle_pass_timed = false;
    // Makes o the running op, not yet started; from_queue: taken off the queue, so the next
    // pass looks at it first (a GPU op is staged there).
    void begin(Op &&o, bool from_queue) {
        op = std::move(o);
        have = true;
        taken = from_queue;
        fast = false;
        scheduled = false;
    }
    void mark_moved() { moved_unstamped = true; }
    void mark_active() { moved_unstamped = active_unstamped = true; }
    void stamp(std::chrono::steady_clock::time_point now) {
        if (moved_unstamped) last_move = now;
        if (active_unstamped) last_activity = now;
        moved_unstamped = active_unstamped = false;
    }
};

// The progress thread's body: drives the stream whenever no caller does, until stopped.
void progress_main(ibex_comm *c);
// Stops the progress thread (abort: drop what is queued) and waits until no caller is
// still driving; afterwards the communicator may be freed.
void stop_progress_thread(ibex_comm *c, bool abort);

// A blocking collective the fast boxes take, run by the calling thread when nothing else
// is queued or running on the stream: no request, no queue, no hand-off. false: not taken
// (the stream is busy, or the boxes do not take it); queue it instead, where it still
// runs over the boxes in its turn. Otherwise *st is its outcome.
bool run_inline(ibex_comm *c, Op &op, ibex_status_t *st);
// A collective the fast boxes take, issued with a request. When the caller may drive, it
// first finishes the running op if its peers' words are in; then, with the stream idle,
// it starts this one here as the running op (no trip through the queue), else queues it.
// A caller issuing many small collectives without waiting so moves them itself instead
// of handing each to the progress thread.
ibex_status_t submit_small(ibex_comm *c, Op &&op, ibex_request **req);
// Queues an op; fails at once (without queueing) when the communicator is in error.
// caller_waits: the caller calls request_wait on *req next, and so drives the op itself;
// otherwise a progress thread napping while callers drive is woken when no caller is left.
ibex_status_t comm_submit(ibex_comm *c, Op &&op, ibex_request **req, bool caller_waits = false);
// Waits for r, driving the stream meanwhile; frees r and returns its status.
ibex_status_t request_wait(ibex_request *r);
// One non-blocking pass of the stream when nobody else drives it (ibex_test).
void request_poke(ibex_request *r);
// Blocks until every queued op has finished.
ibex_status_t comm_drain(ibex_comm *c);

} // namespace ibex::coll
