// One pass of a communicator's stream, and the nap between passes: what the progress
// thread and a caller waiting on a request both run (allreduce/stream_driver.h says who
// drives when). A pass takes the next op, stages it when its buffers are on the GPU
// (allreduce/gpu_staging.h), starts it on the direct path (allreduce/shm_direct.h), the
// fast boxes (allreduce/fastbox.h) or the executor's schedule, polls it, and finishes or
// fails it. The caller holds the communicator's drive lock.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>

#include "allreduce/op.h"

namespace ibex::coll {

using Clock = std::chrono::steady_clock;

int64_t ms_since(Clock::time_point t);
// Wakes a driver sleeping in poll().
void wake(ibex_comm *c);
// Puts the communicator in its error state (first error wins), tells the other ranks when
// the error is this rank's own, and fails the running and queued ops.
void enter_error(ibex_comm *c, ibex_status_t st, const std::string &detail, bool local, Op *running);

enum class Pass { moved, idle, stop };
// One step of the stream. stop: aborting, or stopping with nothing left to run.
// fast_polls: how many times to look at the fast boxes before calling the pass idle.
Pass drive_pass(ibex_comm *c, int fast_polls = 128);
// Nothing moved: busy-poll a while, then sleep until something may have (dl is released
// while asleep or yielding). own_core: this thread has a core to itself.
void drive_idle(ibex_comm *c, std::unique_lock<std::mutex> &dl, int spin_us, bool own_core);

} // namespace ibex::coll
