// How deep the executor's queues are, which both its set-up (executor_setup.cpp) and its
// running (executor.cpp) must agree on.
#pragma once

#include <cstddef>

#include "allreduce/executor.h"

namespace ibex::coll {

inline constexpr size_t kRxBytes = 32; // one control message's receive slot

inline int eager_slots(const ExecutorParams &p) { return p.eager_bytes ? p.eager_slots : 0; }
// Receives kept posted per channel: a window of data and credits each way, and the eager slots.
inline int rx_depth(const ExecutorParams &p) { return 4 * p.window + 8 + eager_slots(p); }

} // namespace ibex::coll
