// Collectives on GPU buffers among the ranks of one host, with no host copy (issue 23):
// every rank exports the CUDA allocations holding its buffers (CUDA IPC), its peers map
// them once (cached, runtime/base/gpu_mappings.h), and each rank does its share on its GPU,
// reading the peers' inputs and writing their outputs through those mappings, as NCCL's
// P2P transport does in read mode. Three fast-box rounds (allreduce/fastbox.h) frame it:
//   1. announce: an allgather of the call and each rank's exports and offsets;
//   2. opened: an allgather of "I mapped every peer's buffers". If some rank could not
//      (a handle refused: a GPU without peer access, another container), every rank
//      falls back to the staging of allreduce/gpu_staging.h for this op, and it is logged;
//   then the local phase, queued on the library's stream behind the work already queued
//   on the legacy default stream (cuda_memory.h says why), where only rank r touches
//   segment (or block) r of anyone's buffers:
//      - allreduce: one kernel of rank r folds segment r of every rank's send buffer in
//        rank order (the same bits as the host path, allreduce/shm_direct.h) and stores
//        the result into every rank's receive buffer: each input byte read once, each
//        output byte written once (cuda_fold_into);
//      - reduce: the same, stored into the root's receive buffer only;
//      - reduce-scatter: one kernel of rank r folds block r of every send buffer into its
//        receive buffer;
//      - allgather: rank r copies its block into every peer's receive buffer;
//      - broadcast: rank r copies segment r of the root's buffer into every rank's;
//   3. once the stream has done that work (an event, polled): a barrier, after which no
//      rank touches this rank's buffers any more.
// Where every rank's buffers lie on one GPU (the announcements name it), rank 0 alone runs
// the local phase for every segment, as one kernel (allreduce, reduce; one per block for
// reduce-scatter, copies for allgather and broadcast): the GPU then runs one process's work
// per op rather than switching between every rank's context, and each byte still moves
// once. Only rank 0 maps then, so round 2 folds into round 3: rank 0 launches where it
// mapped everything, and the last round, an allgather of the opened words, ends the op or
// stages it on every rank (nothing written yet). IBEX_GPU_DIRECT_LEADER=0 (on any rank)
// keeps the per-rank shares.
// In place is safe as it stands: the kernel reads an element of every input before it
// stores that element anywhere, and no other rank touches segment r.
//
// When it applies: the fast boxes are open (one host), at most kMaxFold (8) ranks, every
// rank has a GPU (or the test seam below) and IBEX_GPU_DIRECT is not 0, agreed at
// creation; the op is an allreduce, reduce, reduce-scatter, allgather or broadcast on GPU
// buffers of at least IBEX_GPU_DIRECT_MIN bytes (whole buffer; default 256 KiB). As for
// the fast boxes, every rank must pass GPU buffers to such a call (or host buffers on
// every rank): a rank whose buffers are host memory takes another path, and the ranks
// then report a mismatch rather than hang.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <ibex/coll.h>

#include "allreduce/op.h"
#include "allreduce/step_profile.h"
#include "runtime/base/cuda_memory.h"
#include "runtime/base/gpu_mappings.h"

struct ibex_comm;

namespace ibex::coll {

class GpuDirect {
public:
    // CUDA IPC, or a test's stand-in (set before the communicator is created).
    struct Ipc {
        ibex_status_t (*export_memory)(const void *p, cuda::IpcExport *out);
        cuda::GpuMappings::Opener opener;
    };
    static void set_ipc_for_tests(const Ipc *ipc);

    GpuDirect() = default;
    GpuDirect(const GpuDirect &) = delete;
    GpuDirect &operator=(const GpuDirect &) = delete;
    ~GpuDirect() { close(); }

    // Collective over the bootstrap, after the fast boxes opened.
    ibex_status_t open(ibex_comm *c);
    // Waits for the work it queued, closes every mapping and frees the scratch.
    void close();
    bool enabled() const { return min_bytes_ != 0; }

    // Whether op runs here (the same answer on every rank when every rank passes GPU
    // buffers).
    bool takes(const Op &op) const;
    // Exports this rank's buffers; the fast-box op to run first is sub().
    ibex_status_t begin(const Op &op);
    bool active() const { return phase_ != Phase::idle; }
    const Op &sub() const { return sub_; }
    // The round sub() ran finished: the next step (*done false), or the end (*done true).
    // *fallback: some rank's buffers cannot be mapped; op is staged instead, on every rank.
    ibex_status_t advance(const Op &op, bool *done, bool *fallback);
    // The local phase is queued on the GPU and sub() (the barrier) waits for it: ready()
    // says, without blocking, when it may start.
    bool waiting() const { return phase_ == Phase::running; }
    bool ready();
    // The op failed: waits for the queued work (it may still write peers' buffers).
    void abandon();

    // Ops that ran this way to the end, and ops that fell back to the staging.
    uint64_t taken() const { return taken_; }
    uint64_t fallbacks() const { return fallbacks_; }
    // Of the ops taken, those that rank 0 ran whole (every buffer on one GPU).
    uint64_t taken_whole() const { return taken_whole_; }
    // Why the last op that fell back did ("" if none did).
    const char *fallback_reason() const { return fallback_reason_.c_str(); }

private:
    enum class Phase { idle, announce, opened, running, barrier };
    struct Side {
        cuda::IpcExport x;
        uint64_t id;   // this rank's id for the allocation (0: the side is unused)
        uint64_t off;  // of the buffer in the allocation
        uint64_t addr; // the buffer here (a peer in this same process uses it as it is)
    };
    struct Announce {
        uint64_t count;
        int32_t pid;
        uint32_t call; // type | op << 8 | kind << 16
        int32_t root;
        uint32_t ok; // every buffer this rank uses is exported
        Side send, recv;
    };
    static constexpr size_t kMaxMappingsPerPeer = 8;
    static constexpr size_t kMaxExports = 256; // allocations this rank remembers exporting

    bool export_side(const void *p, uint64_t len, Side *out);
    ibex_status_t map_side(int q, const Side &s, uint64_t len, uint8_t **out);
    ibex_status_t run_local(const Op &op, bool whole);
    ibex_status_t copy_to_all(const uint8_t *src, size_t at, size_t bytes);
    bool one_gpu() const;
    void set_opened_round();
    bool all_opened();
    void fall_back(bool *fallback);
    ibex_status_t launch(const Op &op);
    void note_fallback(const char *why);
    // IBEX_GPU_DIRECT_PROFILE=1: the mean time of each step, written to stderr at close.
    void lap(int step) { profile_.lap(step); }
    void report_profile();

    int rank_ = 0, nranks_ = 1, device_ = 0;
    size_t min_bytes_ = 0; // 0: off
    bool test_ipc_ = false;
    bool leader_ok_ = false; // every rank lets rank 0 run ops on one GPU whole
    bool whole_ = false;     // this op: rank 0 runs it whole
    Ipc ipc_{};
    Phase phase_ = Phase::idle;
    Op sub_;
    Announce mine_{};
    std::vector<Announce> all_;
    uint32_t opened_ = 0;
    std::vector<uint32_t> all_opened_;
    std::vector<uint8_t *> send_at_, recv_at_; // every rank's buffers as reached here
    cuda::CopyFence fence_;
    // This rank's exports, by allocation base: the handle and the id peers cache it by (a
    // new allocation at the same base has another handle, so another id).
    struct Exported {
        uint8_t handle[64];
        uint64_t id;
    };
    std::map<uint64_t, Exported> exports_;
    uint64_t next_id_ = 0;
    std::optional<cuda::GpuMappings> maps_;
    // Per peer, the id its allocation at each base had when last mapped here: a new id at
    // a known base means the old allocation was freed, and its mapping is closed at once
    // (CUDA leaves an exporter's cudaFree under an open mapping undefined).
    std::vector<std::map<uint64_t, uint64_t>> peer_bases_;
    uint64_t taken_ = 0, fallbacks_ = 0, taken_whole_ = 0;
    std::string fallback_reason_;
    StepProfile profile_; // IBEX_GPU_DIRECT_PROFILE
};

} // namespace ibex::coll
