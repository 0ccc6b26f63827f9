// Keeps DPDK 22.11's memif PMD from unmapping a link's shared regions under a running
// burst, the one case the leave handshake (memif_session.h) cannot cover: a peer that is
// killed says nothing, and the PMD tears the link down on EAL's interrupt thread as soon as
// the control socket closes. Its disconnect first marks the device unconnected (every
// burst checks that on entry) and then munmaps the regions; a burst that passed the check
// before it and is still running then touches unmapped memory (SIGSEGV).
//
// So each burst on a memif port is bracketed by a MemifBurst, which marks the calling
// thread's slot odd while it runs (two plain stores where membarrier is available), and install_memif_unmap_guard() points the PMD's import
// of munmap at a function that first waits until every burst that was running has ended.
// A burst that starts after that sees the device unconnected and touches nothing.
#pragma once

#include <atomic>
#include <cstdint>

namespace ibex::soft::dpdk {

// One per thread that bursts on memif ports; odd while it is inside a burst.
struct alignas(64) BurstSlot {
    std::atomic<uint64_t> seq{0};
    std::atomic<bool> taken{false};
};

// True once the wait fences other threads itself (membarrier's private expedited command).
extern std::atomic<bool> g_remote_burst_fence;
inline bool burst_fence_is_remote() { return g_remote_burst_fence.load(std::memory_order_relaxed); }
// Registers the process for that command (install_memif_unmap_guard() does, before any
// port exists); false where the kernel lacks it, and bursts then fence themselves.
bool use_remote_burst_fence();

// The calling thread's slot, claimed on first use and given back when the thread ends;
// nullptr when every slot is taken (the thread then counts in a shared counter).
BurstSlot *this_thread_burst_slot();
void enter_unslotted_burst();
void leave_unslotted_burst();

// Brackets one rx or tx burst (or anything else that touches a memif link's rings).
class MemifBurst {
public:
    explicit MemifBurst(bool memif) {
        if (!memif) return;
        slot_ = this_thread_burst_slot();
        if (!slot_) [[unlikely]] {
            unslotted_ = true;
            enter_unslotted_burst();
            return;
        }
        seq_ = slot_->seq.load(std::memory_order_relaxed) + 1;
        // The slot must read odd before the burst reads the device's flags. Where the wait
        // can make every thread of the process pass a full barrier (membarrier), a plain
        // store in program order is enough; else a seq_cst store (about 7 ns).
        if (burst_fence_is_remote()) [[likely]] {
            slot_->seq.store(seq_, std::memory_order_relaxed);
            std::atomic_signal_fence(std::memory_order_seq_cst);
        } else {
            slot_->seq.store(seq_, std::memory_order_seq_cst);
        }
    }
    ~MemifBurst() {
        if (slot_) slot_->seq.store(seq_ + 1, std::memory_order_release);
        else if (unslotted_) [[unlikely]] leave_unslotted_burst();
    }
    MemifBurst(const MemifBurst &) = delete;
    MemifBurst &operator=(const MemifBurst &) = delete;

private:
    BurstSlot *slot_ = nullptr;
    uint64_t seq_ = 0;
    bool unslotted_ = false;
};

// Waits (bounded: a burst is microseconds; past kBurstWaitLimitNs it logs and returns)
// until every burst that was running on another thread when it was called has ended.
inline constexpr uint64_t kBurstWaitLimitNs = 2'000'000'000;
void wait_out_running_bursts();

// After EAL has loaded its plugins: redirects the memif PMD's munmap and close (their GOT
// entries) to wait_out_running_bursts() followed by the call. Idempotent; false (and
// logged) where the PMD is not a loaded shared object (a static DPDK) or its munmap import
// was not found.
bool install_memif_unmap_guard();

} // namespace ibex::soft::dpdk
