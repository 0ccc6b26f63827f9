// What the shm provider keeps in shared memory: one segment per context (identity, the
// doorbell its progress thread sleeps on, the word peers read to test cross-memory
// attach) and one per QP incarnation (the two single-producer rings the peer QP writes:
// requests to this QP and responses to this QP's requests, plus the per-slot data areas
// the `ring` copy mechanism stages payload through). Layouts are plain data with atomics
// only, so every process maps the same bytes.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "transport/soft/engine/work_queue.h"

namespace ibex::shm {

inline constexpr uint32_t kCtxMagic = 0x49425843u ^ 0x5348u; // distinct from any struct magic
inline constexpr uint32_t kQpMagic = 0x49425851u ^ 0x5348u;
inline constexpr uint32_t kSlots = 64;             // requests in flight per QP
inline constexpr uint32_t kSlotBytes = 64u << 10;  // `ring` mechanism: payload per request
inline constexpr int kMaxSge = soft::kMaxSge;

// How a target moves payload between its memory and the initiator's.
enum class Copy : uint32_t { kCma = 1, kRing = 2, kMap = 3 };

inline constexpr uint32_t kPublishedMrs = 256; // MRs with key index below this are published

// An MR over ibex_mem_alloc memory as its owner publishes it, so a peer can check a WRITE
// or READ against it and copy straight into or out of its own mapping of the allocation.
// A seqlock: `seq` is odd while the owner changes the entry.
struct PublishedMr {
    std::atomic<uint32_t> seq;
    std::atomic<uint32_t> rkey; // 0: none
    std::atomic<uint32_t> access;
    std::atomic<uint64_t> addr, len, alloc, alloc_off;
};

// A GPU allocation its owner exported (CUDA IPC), so a peer can map it and copy into or
// out of it on the GPU. An MR in it is published with alloc = kGpuAlloc | id. A seqlock as
// PublishedMr; id 0: a free entry.
inline constexpr uint32_t kGpuExports = 64;
inline constexpr uint64_t kGpuAlloc = 1ull << 63;
struct GpuExportEntry {
    std::atomic<uint32_t> seq;
    std::atomic<uint64_t> id;
    int32_t device;
    uint32_t has_handle; // 0: only a peer in this same process can reach it (at `base`)
    uint64_t base, size; // in the owner's address space
    uint8_t handle[64];  // cudaIpcMemHandle_t
};

struct alignas(64) CtxShared {
    uint32_t magic;
    uint32_t pid;
    uint64_t nonce;
    uint64_t probe_addr; // where `probe` lies in the owner's address space
    uint64_t probe;      // == nonce: what a peer's process_vm_readv must read back
    alignas(64) std::atomic<uint32_t> doorbell; // futex word: bumped by every producer
    std::atomic<uint32_t> sleeping;             // the progress thread waits on doorbell
    PublishedMr mrs[kPublishedMrs];             // by key index (key >> 8)
    GpuExportEntry gpu_exports[kGpuExports];
};

struct RemoteSge {
    uint64_t addr;      // in the initiator's address space
    uint64_t len;
    uint64_t alloc;     // `map`: the initiator's ibex_mem_alloc id holding it (0: none)
    uint64_t alloc_off; // and the offset in it
};

// One fragment of a work request. A message moves in one fragment under `cma`, in
// fragments of at most kSlotBytes under `ring`.
struct Request {
    uint64_t seq;
    uint8_t opcode; // ibex_wr_opcode_t
    uint8_t first;
    uint8_t last;
    uint8_t nsge;
    uint8_t mapped; // every sge names an allocation the target can map (`map`, or a GPU export)
    uint8_t gpu;    // some sge is GPU memory: the target must not touch it with the CPU
    uint8_t pad[2];
    uint32_t imm;
    uint32_t rkey;
    uint32_t len;         // bytes in this fragment
    uint32_t offset;      // of this fragment in the message
    uint32_t msg_len;
    uint64_t msg_addr;    // remote range of the whole message: checked on every fragment
    uint64_t compare_add;
    uint64_t swap;
    RemoteSge sge[kMaxSge]; // `cma`: the initiator's buffers for this fragment
};

enum class RespKind : uint8_t { kAck = 0, kRnr = 1, kNak = 2 };

struct Response {
    uint64_t seq;
    RespKind kind;
    uint8_t rnr_code;  // kRnr: the responder's min_rnr_timer
    uint16_t status;   // kNak: the requester's ibex_wc_status_t
    uint32_t len;
    uint64_t atomic_orig;
};

// Single producer (the peer), single consumer (the owner). Positions only grow.
template <typename T>
struct SpscRing {
    alignas(64) std::atomic<uint64_t> head; // consumer
    alignas(64) std::atomic<uint64_t> tail; // producer
    T slot[kSlots];

    bool can_push() const { return tail.load(std::memory_order_relaxed) - head.load(std::memory_order_acquire) < kSlots; }
    T &next() { return slot[tail.load(std::memory_order_relaxed) % kSlots]; }
    void publish() { tail.store(tail.load(std::memory_order_relaxed) + 1, std::memory_order_release); }
    const T *peek() const {
        const uint64_t h = head.load(std::memory_order_relaxed);
        return h == tail.load(std::memory_order_acquire) ? nullptr : &slot[h % kSlots];
    }
    void pop() { head.store(head.load(std::memory_order_relaxed) + 1, std::memory_order_release); }
};

struct QpShared {
    uint32_t magic;
    uint32_t qpn;
    std::atomic<uint32_t> ready;  // 1 from RTR on: `mode` is valid and requests are served
    std::atomic<uint32_t> mode;   // Copy: how this QP serves requests
    std::atomic<uint32_t> closed; // the owner reset or destroyed this incarnation
    std::atomic<uint32_t> state;  // the owner's ibex_qp_state_t (direct WRITE/READ need RTR+)
    std::atomic<uint32_t> access; // the owner's qp_access_flags
    SpscRing<Request> req;        // written by the peer's requester
    SpscRing<Response> resp;      // written by the peer's responder
    alignas(4096) uint8_t req_data[kSlots][kSlotBytes];  // `ring`: WRITE/SEND payload by seq
    uint8_t resp_data[kSlots][kSlotBytes];               // `ring`: READ payload by seq
};

} // namespace ibex::shm
