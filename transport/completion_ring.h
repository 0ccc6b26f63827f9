// The completion queue of a software provider (soft, shm): a bounded ring of work
// completions plus an eventfd that wakes ibex_cq_wait / a completion channel when the CQ is
// armed. The ring is guarded by the owning context's lock; this holds no lock itself.
#pragma once

#include <cstddef>
#include <cstdint>

#include <ibex/ibex.h>

#include "transport/soft/engine/work_queue.h"

namespace ibex {

struct CompletionRing {
    soft::Ring<ibex_wc_t> ring;
    int event_fd = -1;
    bool armed = false;
    uint64_t overflows = 0;

    explicit CompletionRing(size_t capacity) : ring(capacity) {}

    // Appends a completion and signals an armed CQ. A full ring keeps the oldest
    // completions and reports the overrun once, as an RNIC raises its fatal async event.
    void push(const ibex_wc_t &wc) {
        emplace([&](ibex_wc_t &slot) { slot = wc; });
    }
    // The same, with the completion written in its slot by fill(slot) (the slot starts
    // zeroed). A completion built on the stack and copied in costs a store-forwarding
    // stall (wide loads over narrow stores) on every post of the shm provider's fast path.
    template <typename Fill>
    void emplace(Fill fill) {
        if (ring.full()) return overrun();
        ibex_wc_t &slot = ring.push();
        slot = ibex_wc_t{};
        fill(slot);
        if (armed && event_fd >= 0) signal();
    }
    // ibex_req_notify_cq: armed for the next completion, or signalled now when some wait.
    void arm();
    // Sleeps on the eventfd for at most timeout_ms (-1: no limit) and drains it.
    void wait_event(int timeout_ms) const;

private:
    void signal();
    void overrun();
};

} // namespace ibex
