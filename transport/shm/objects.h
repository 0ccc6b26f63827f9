// The shm provider's process-local objects. Each derives from its public handle struct,
// so a handle is the object. Everything mutable of a context is guarded by its mutex;
// what peers see lives in the shared segments (layout.h).
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <set>
#include <mutex>
#include <thread>
#include <vector>

#include "transport/mr_keys.h"
#include "transport/completion_ring.h"
#include "transport/provider.h"
#include "transport/qp_attrs.h"
#include "runtime/base/gpu_mappings.h"
#include "transport/shm/in_place_lane.h"
#include "transport/shm/layout.h"
#include "transport/shm/segment.h"
#include "transport/soft/engine/work_queue.h"

namespace ibex::shm {

using soft::Ring;
using soft::SgeList;

struct ShmQp;
struct ShmCq;

// Payload moved per mechanism, counted by the side that moves it (the target for `cma`,
// both for `ring`: the initiator copies in or out, the target the other half).
struct CopyStats {
    uint64_t cma_ops = 0, cma_bytes = 0;
    uint64_t ring_ops = 0, ring_bytes = 0;
    uint64_t map_ops = 0, map_bytes = 0;
    uint64_t lane_ops = 0; // of map_ops: WRITEs through a QP's in-place lane, without the lock
    // post_send calls of this process that took the lock (lane_ops counts the others): what
    // this side asked for, apart from what its peers' requests cost it.
    uint64_t locked_posts = 0;
};

// Memory regions by key (transport/mr_keys.h), with the responder's range check.
class MrTable {
public:
    uint32_t add(ibex_mr *mr) { return keys_.add(mr); }
    void remove(uint32_t key) { keys_.remove(key); }
    ibex_mr *find(uint32_t key) const { return keys_.find(key); }
    // [addr, addr + len) inside the region of `key` with all of `access`, else nullptr.
    // Inline: it is on every post's path.
    uint8_t *resolve(uint32_t key, uint64_t addr, uint64_t len, unsigned access) const {
        ibex_mr *mr = find(key);
        if (!mr || (mr->access & access) != access) return nullptr;
        const uint64_t base = reinterpret_cast<uintptr_t>(mr->addr);
        if (addr < base || len > mr->length || addr - base > mr->length - len) return nullptr;
        return reinterpret_cast<uint8_t *>(static_cast<uintptr_t>(addr));
    }

private:
    MrKeys keys_;
};

// An ibex_mem_alloc allocation of this process: memfd-backed, shared with a peer context
// (its fd over a UNIX socket) the first time a request of ours uses it.
struct Alloc {
    uint64_t id = 0;
    int fd = -1;
    size_t size = 0;
};

// A peer's allocation mapped here, keyed by (peer pid << 32 | peer context id, alloc id).
struct PeerMapping {
    uint8_t *base = nullptr;
    size_t size = 0;
};

// A GPU allocation of this process that its MRs made us export (gpu.cpp), by base.
struct GpuExport {
    uint64_t id = 0;
    uint64_t size = 0;
};

struct ShmContext : ibex_context {
    std::mutex mu;
    uint32_t id = 0; // per process
    Segment seg;
    CtxShared *shared = nullptr;
    bool progress_thread = true;
    PathDefaults path; // new QPs' traffic class and service level (reported; no wire here)
    std::thread thread;
    std::atomic<bool> stop{false};
    // poll_cq/ibex_progress calls by the application: a count, not a time, so the polling
    // loop reads no clock (the progress thread times it when the count moves).
    std::atomic<uint64_t> app_polls{0};
    // The doorbell (bumped by every producer into this context's rings) as it was when the
    // last progress pass began, if that pass found nothing to do: no request or response
    // waiting, every SQ empty. While the doorbell still reads the same, another pass would
    // find nothing either, and the application's polling skips it (and the lock). Anything
    // that can make work without a producer (post_send, post_recv, QP changes) clears it.
    static constexpr uint64_t kNotQuiet = ~0ull;
    std::atomic<uint64_t> quiet_bell{kNotQuiet};
    void unquiet() { quiet_bell.store(kNotQuiet, std::memory_order_relaxed); } // lock held
    bool quiet() const {
        return quiet_bell.load(std::memory_order_acquire) == shared->doorbell.load(std::memory_order_acquire);
    }
    // The application polled: the progress thread keeps off the core meanwhile. A plain
    // store, not a locked add: a lost count between racing pollers still moves it.
    void note_app_poll() {
        app_polls.store(app_polls.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
        if (app_blocking.load(std::memory_order_relaxed)) app_blocking.store(false, std::memory_order_relaxed);
    }
    // The application is about to block (ibex_cq_wait, or armed a CQ to sleep on its fd):
    // the progress thread must not nap now, and is woken from a nap. Futex word `nap`
    // (process-local, so peers' doorbells never pay for a wake-up) ends a nap early.
    std::atomic<bool> app_blocking{false};
    std::atomic<uint32_t> nap{0};
    void note_app_blocking();
    MrTable mrs;
    std::vector<ShmQp *> qps;
    uint32_t next_qpn = 1;
    int live_objects = 0; // PDs and CQs
    ibex_counters_t counters{};
    CopyStats copies;
    // ---- `map` (alloc.cpp)
    std::map<uintptr_t, Alloc> allocs; // by base address
    bool offers_pending = false;       // an fd a peer's queue refused, offered again by progress
    uint64_t next_alloc = 1;
    int sock = -1; // datagram socket "@ibex-shm.<pid>.<ctx>": peers' fds arrive here
    std::map<std::pair<uint64_t, uint64_t>, PeerMapping> peer_maps;
    // The last peer_maps hit: a WRITE loop into one buffer skips the map lookup. Mappings
    // live until close_fd_socket, which clears this too.
    std::pair<uint64_t, uint64_t> last_map_key{0, 0};
    PeerMapping last_map{};
    // ---- GPU memory (gpu.cpp)
    // This context's MRs over GPU memory (decided once, at registration): every local
    // buffer of a work request lies in an MR, so these ranges tell GPU memory apart on the
    // data path without a CUDA call. None: nothing of this context is GPU memory.
    struct DeviceRange {
        uintptr_t start, end;
        uint32_t key;
    };
    std::vector<DeviceRange> device_ranges;
    size_t device_mrs = 0; // device_ranges.size(), read on every copy
    std::map<uint64_t, GpuExport> gpu_exports;
    uint64_t next_gpu_export = 1;
    cuda::GpuMappings gpu_maps;          // peers' exports, by (peer context key, id)
    std::vector<uint8_t> bounce;    // target side: GPU memory <-> cross-memory attach
};

// An initiator's copy into or out of a peer's GPU memory, queued on the GPU: its WR
// completes when the copy does, in order.
struct GpuPending {
    uint64_t wr_id;
    uint32_t len;
    uint8_t opcode;
    bool signaled;
    cuda::CopyFence fence;
};

struct ShmPd : ibex_pd {
    ShmContext *ctx = nullptr;
    int users = 0;
};

// push(), arm() and the ring are CompletionRing's, called with the context lock held.
struct ShmCq : ibex_cq, CompletionRing {
    ShmContext *ctx = nullptr;
    int users = 0;

    explicit ShmCq(size_t capacity) : CompletionRing(capacity) {}
};

using soft::RecvWqe;
using soft::SendWqe; // first_psn, npkts, solicited and fence are unused here

// What the requester remembers of a fragment in flight, by seq % kSlots.
struct Fragment {
    uint64_t wqe = 0; // SQ position
    uint32_t offset = 0;
    uint32_t len = 0;
    bool last = false;
};

struct ShmQp : ibex_qp, QpAttrs {
    ShmContext *ctx = nullptr;
    ShmCq *scq = nullptr;
    ShmCq *rcq = nullptr;
    bool sig_all = false;
    uint32_t sq_psn = 0, rq_psn = 0; // reported by query_qp; shm needs no PSNs

    // ---- this incarnation's segment (a new one on every entry into RESET)
    uint32_t generation = 0;
    Segment seg;
    QpShared *self = nullptr;
    Copy serve_mode = Copy::kCma; // how this QP serves the peer's requests

    // ---- the peer (from RTR on)
    ibex_ep_addr_t dest{};
    uint32_t peer_pid = 0, peer_ctx_id = 0;
    Segment peer_seg, peer_ctx_seg;
    QpShared *peer = nullptr;
    CtxShared *peer_ctx = nullptr;
    Copy send_mode = Copy::kCma; // the peer's serve_mode, read once it is ready
    uint32_t forced = 0;         // IBEX_SHM_COPY at RTR (Copy, 0: none)
    std::set<uint64_t> shared_allocs; // our allocation ids whose fd the peer context got

    // ---- requester
    InPlaceLane lane; // WRITEs that skip the lock (in_place_lane.h); closed by anything that stales it
    Ring<SendWqe> sq;
    uint64_t tx_wqe = 0;       // SQ position being sent
    uint32_t tx_off = 0;       // its next byte
    uint64_t next_seq = 0;     // seq of the next fragment
    uint64_t una_seq = 0;      // oldest fragment without a response
    Fragment frags[kSlots];
    int retry_left = 7;
    int rnr_left = 7;
    uint64_t ack_deadline = 0; // ns; 0: nothing outstanding
    uint64_t rnr_until = 0;    // ns: nothing sent before this (RNR back-off)
    uint64_t liveness_at = 0;  // ns: next check that the peer process runs (timeout 0)
    std::deque<GpuPending> gpu_pending; // popped from the SQ, copy still running
    uint64_t gpu_liveness_at = 0;       // ns: next look at the peer process before a GPU copy

    // ---- responder
    Ring<RecvWqe> rq;
    uint64_t epsn = 0;         // seq expected next
    bool in_send = false;      // a multi-fragment SEND is being placed in rq.front()

    ShmQp(size_t send_cap, size_t recv_cap) : sq(send_cap), rq(recv_cap) {}
};

inline ShmContext *to_shm(ibex_context *c) { return static_cast<ShmContext *>(c); }
inline ShmQp *qp_of(ibex_qp *q) { return static_cast<ShmQp *>(q); }
inline ShmCq *cq_of(ibex_cq *c) { return static_cast<ShmCq *>(c); }
inline ShmContext *ctx_of(ibex_pd *pd) { return static_cast<ShmPd *>(pd)->ctx; }

} // namespace ibex::shm
