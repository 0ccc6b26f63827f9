// A communicator's FIFO of queued collectives: a ring that grows by doubling and never
// shrinks, so that a caller issuing many small collectives without waiting allocates
// nothing per collective (a std::deque allocates and frees a block every few ops).
// Changed only under the communicator's lock; its size may be read without it
// (size_unlocked), so that a pass over a running op need not take the lock.
#pragma once

#include <atomic>
#include <cstddef>
#include <utility>
#include <vector>

#include "allreduce/op.h"

namespace ibex::coll {

class OpQueue {
public:
    bool empty() const { return size_ == 0; }
    size_t size() const { return size_; }
    // Without the lock: possibly stale, never torn.
    size_t size_unlocked() const { return published_.load(std::memory_order_acquire); }
    Op &front() { return slots_[head_]; }
    void pop_front() {
        slots_[head_] = Op{};
        head_ = (head_ + 1) & (slots_.size() - 1);
        published_.store(--size_, std::memory_order_release);
    }
    void push_back(Op &&op) {
        if (size_ == slots_.size()) grow();
        slots_[(head_ + size_) & (slots_.size() - 1)] = std::move(op);
        published_.store(++size_, std::memory_order_release);
    }
    // Empties this queue into out (in order), which is cleared first.
    void drain_into(std::vector<Op> *out) {
        out->clear();
        out->reserve(size_);
        while (!empty()) {
            out->push_back(std::move(front()));
            pop_front();
        }
    }

private:
    void grow() {
        std::vector<Op> bigger(slots_.empty() ? 16 : slots_.size() * 2);
        for (size_t i = 0; i < size_; ++i) bigger[i] = std::move(slots_[(head_ + i) & (slots_.size() - 1)]);
        slots_.swap(bigger);
        head_ = 0;
    }

    std::vector<Op> slots_; // a power of two in size
    size_t head_ = 0, size_ = 0;
    std::atomic<size_t> published_{0}; // size_, for readers without the lock
};

} // namespace ibex::coll
