// How deep the executor's queues are and what its work request ids and immediate data
// say, which its set-up (executor_setup.cpp), its running (executor.cpp) and its
// completions (executor_completions.cpp) must agree on.
#pragma once

#include <cstddef>
#include <cstdint>

#include "allreduce/executor.h"

namespace ibex::coll {

inline constexpr size_t kRxBytes = 32; // one control message's receive slot

inline int eager_slots(const ExecutorParams &p) { return p.eager_bytes ? p.eager_slots : 0; }
// Receives kept posted per channel: a window of data and credits each way, and the eager slots.
inline int rx_depth(const ExecutorParams &p) { return 4 * p.window + 8 + eager_slots(p); }

// A work request id: its kind, its channel and a value (a step, or a receive slot).
enum WrKind : uint64_t { kData = 1, kCredit = 2, kRecv = 3, kEagerData = 4, kFastbox = 5 };
inline uint64_t wr_id(WrKind k, size_t chan, uint32_t value) {
    return (static_cast<uint64_t>(k) << 56) | (static_cast<uint64_t>(chan) << 32) | value;
}
inline WrKind wr_kind(uint64_t id) { return static_cast<WrKind>(id >> 56); }
inline size_t wr_chan(uint64_t id) { return static_cast<size_t>((id >> 32) & 0xffffff); }
inline uint32_t wr_value(uint64_t id) { return static_cast<uint32_t>(id); }

// Immediate data of a data message: the sequence number, and whether it went to an eager slot.
inline constexpr uint32_t kImmEager = 1u << 31;
inline constexpr uint32_t kImmSeqMask = 0xffffff;

} // namespace ibex::coll
