// The latency path without the context lock. A WRITE that went in place (write_in_place,
// under the lock) leaves its checked target here: the local MR's range under its lkey, the
// peer MR's range under its rkey and where that range lies in this process's mapping of
// the peer's allocation. The next WRITE between the same two regions is checked against
// this copy, plus what the peer can change without telling this process (its QP's state
// and its MR entry's seqlock), and copied at once. Everything that could make the copy
// stale and happens in this process (a WQE queued behind it, a QP state change, an MR
// deregistered) closes the lane under the lock; the next in-place WRITE opens it again.
//
// Readers take no lock, so the fields are a seqlock: `seq` is odd while the lane is
// closed or being refilled. Two threads posting to one QP at once may both pass; their
// WRITEs had no order between them anyway.
#pragma once

#include <atomic>
#include <cstdint>

#include "runtime/include/ibex/ibex.h"
#include "transport/shm/layout.h"

namespace ibex::shm {

struct LaneTarget {
    uint32_t lkey = 0, rkey = 0;
    uint64_t local_addr = 0, local_len = 0;   // the local MR
    uint64_t remote_addr = 0, remote_len = 0; // the peer's MR
    uint8_t *remote_base = nullptr;           // remote_addr as mapped here
    const std::atomic<uint32_t> *peer_mr_seq = nullptr;
    uint32_t peer_mr_seq_seen = 0;
    const QpShared *peer = nullptr; // the peer QP's shared record
};

class InPlaceLane {
public:
    // Lock held (the only writer).
    void open(const LaneTarget &t) {
        const uint32_t s = seq_.load(std::memory_order_relaxed) | 1u;
        seq_.store(s, std::memory_order_relaxed);
        std::atomic_thread_fence(std::memory_order_release);
        lkey_.store(t.lkey, std::memory_order_relaxed);
        rkey_.store(t.rkey, std::memory_order_relaxed);
        local_addr_.store(t.local_addr, std::memory_order_relaxed);
        local_len_.store(t.local_len, std::memory_order_relaxed);
        remote_addr_.store(t.remote_addr, std::memory_order_relaxed);
        remote_len_.store(t.remote_len, std::memory_order_relaxed);
        remote_base_.store(t.remote_base, std::memory_order_relaxed);
        peer_mr_seq_.store(t.peer_mr_seq, std::memory_order_relaxed);
        peer_mr_seq_seen_.store(t.peer_mr_seq_seen, std::memory_order_relaxed);
        peer_.store(t.peer, std::memory_order_relaxed);
        seq_.store(s + 1, std::memory_order_release);
    }
    // Lock held.
    void close() {
        const uint32_t s = seq_.load(std::memory_order_relaxed);
        if (!(s & 1)) seq_.store(s + 1, std::memory_order_release);
    }

    // Where a WRITE of [addr, +len) under lkey to [remote_addr, +len) under rkey lands,
    // when the lane covers it and the peer's MR entry and QP still accept it; else nullptr.
    // Inlined into the post: a call here is a measurable part of an 8-byte WRITE.
    [[gnu::always_inline]] uint8_t *target(uint32_t lkey, uint64_t addr, uint64_t len, uint32_t rkey,
                                           uint64_t remote_addr) const {
        const uint32_t s = seq_.load(std::memory_order_acquire);
        if (s & 1) return nullptr;
        const uint64_t la = local_addr_.load(std::memory_order_relaxed), ll = local_len_.load(std::memory_order_relaxed);
        const uint64_t ra = remote_addr_.load(std::memory_order_relaxed), rl = remote_len_.load(std::memory_order_relaxed);
        if (lkey != lkey_.load(std::memory_order_relaxed) || rkey != rkey_.load(std::memory_order_relaxed) ||
            addr < la || len > ll || addr - la > ll - len || remote_addr < ra || len > rl || remote_addr - ra > rl - len)
            return nullptr;
        uint8_t *dst = remote_base_.load(std::memory_order_relaxed) + (remote_addr - ra);
        const std::atomic<uint32_t> *mr_seq = peer_mr_seq_.load(std::memory_order_relaxed);
        const uint32_t mr_seq_seen = peer_mr_seq_seen_.load(std::memory_order_relaxed);
        const QpShared *peer = peer_.load(std::memory_order_relaxed);
        std::atomic_thread_fence(std::memory_order_acquire);
        if (seq_.load(std::memory_order_relaxed) != s) return nullptr;
        // The peer's side, which it changes without a word to us: its MR entry (a seqlock
        // that moves on every change) and its QP.
        if (mr_seq->load(std::memory_order_acquire) != mr_seq_seen) return nullptr;
        const uint32_t state = peer->state.load(std::memory_order_acquire);
        if ((state != IBEX_QPS_RTR && state != IBEX_QPS_RTS) || peer->closed.load(std::memory_order_relaxed) ||
            !(peer->access.load(std::memory_order_relaxed) & IBEX_ACCESS_REMOTE_WRITE))
            return nullptr;
        return dst;
    }

    // Copies done through the lane, counted without a locked instruction (a lost count
    // needs two threads posting to one QP at once); copy_stats adds them in.
    void count(uint64_t bytes) {
        ops_.store(ops_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
        bytes_.store(bytes_.load(std::memory_order_relaxed) + bytes, std::memory_order_relaxed);
    }
    uint64_t ops() const { return ops_.load(std::memory_order_relaxed); }
    uint64_t bytes() const { return bytes_.load(std::memory_order_relaxed); }
    // Adds them to `map` copy counters (`lane`: the same ops counted apart).
    void add_to(uint64_t *map_ops, uint64_t *map_bytes, uint64_t *lane) const {
        *map_ops += ops();
        *map_bytes += bytes();
        *lane += ops();
    }

private:
    std::atomic<uint32_t> seq_{1}; // closed until the first in-place WRITE
    std::atomic<uint32_t> lkey_{0}, rkey_{0};
    std::atomic<uint64_t> local_addr_{0}, local_len_{0}, remote_addr_{0}, remote_len_{0};
    std::atomic<uint8_t *> remote_base_{nullptr};
    std::atomic<const std::atomic<uint32_t> *> peer_mr_seq_{nullptr};
    std::atomic<uint32_t> peer_mr_seq_seen_{0};
    std::atomic<const QpShared *> peer_{nullptr};
    std::atomic<uint64_t> ops_{0}, bytes_{0};
};

} // namespace ibex::shm
