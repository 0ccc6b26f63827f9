// Large collectives among the ranks of one host, single-copy: every rank reads its peers'
// buffers straight out of their address spaces with process_vm_readv, and writes results
// straight into theirs with process_vm_writev (cross-memory attach, as Open MPI's vader
// uses it), instead of sending slices through the transport.
//
// Two fast-box rounds (allreduce/fastbox.h) frame one local phase:
//   1. announce: an allgather of each rank's pid, buffer addresses and call, so a rank
//      knows where its peers' data is and that they have entered the collective;
//   2. the local phase, where only rank r touches segment (or block) r of anyone's
//      buffers, in place or not, so no rank waits on another inside it:
//      - allreduce: rank r takes segment r block by block (256 KiB): it reads that block
//        of every peer's send buffer, reduces the blocks in rank order into its own
//        receive buffer (every segment is computed once, by one rank: the same bits
//        everywhere) and writes the result, still in cache, into every peer's receive
//        buffer at the same place;
//      - reduce: the same, pushing to the root only; reduce-scatter: rank r reduces block
//        r of every send buffer into its own receive buffer;
//      - allgather: rank r writes its block into every peer's receive buffer;
//      - broadcast: every rank reads the root's buffer;
//      - alltoall: rank r reads block r of every peer's send buffer into its receive buffer;
//   3. a barrier: every result is in place and nobody touches this rank's buffers any
//      more, so the call may return.
// Per rank an allreduce moves (n-1)/n of the buffer in and (n-1)/n out across address
// spaces, with no intermediate copy. (Reading the results back instead of pushing them, in
// a third phase after a second barrier, measured bimodal here: 2.8 or 8.7 GB/s busbw at
// 1 MiB from run to run on 2 ranks, where pushing stayed at 7.7-8.6.)
//
// Staged collectives. process_vm_readv/writev pin every page they touch and copy at about
// 12.6 GB/s here, against 40+ for a memcpy. So a collective whose whole buffer is at most
// IBEX_SHM_STAGE_BYTES (default 32 MiB; 0: off) goes through staging
// memory instead: each rank owns an ibex_mem_alloc region of twice that size (an input
// area, then a result area), registered, which every peer maps once at creation
// (ibex_rkey_ptr over the shm QP). Allreduce:
//   0. before the announce round, rank r copies the segments q != r of its send buffer into
//      its input area, at their own offsets;
//   1. after it, rank r reduces segment r in rank order, block by block, reading its own
//      send buffer and its peers' input areas through their mappings, into its receive
//      buffer, and copies each result block to the same offset of its result area;
//   2. after the barrier round, it copies every peer q's segment q out of q's result area.
// Reduce: the same, but the root keeps its own segment and alone copies the others out in
// step 2. Reduce-scatter: step 0 stages the blocks q != r, step 1 reduces block r into the
// receive buffer. Allgather: step 0 stages this rank's block at its place, step 1 copies every
// peer's out. Broadcast: the root stages its buffer, the others copy it out in step 1.
// Alltoall: step 0 stages the blocks q != r, step 1 copies block r out of every peer's input
// area (two ranks with process_vm_* keep it instead: one copy against two).
// Three (allreduce, reduce) or two memcpy-speed passes and no page pinning. Reuse is safe without
// a third round: a rank's next step 0 writes its input area, which peers read only in their
// step 1, done before their barrier word; its next step 1 writes its result area, which
// peers read in their step 2, done before they enter the next announce round. (One area for
// both would not do: segments move with the count, so the next step 0 could overwrite a
// result a peer is still copying out.) Steps 0 and 1 write the staging with stores that
// bypass the cache (allreduce/cpu/copy_bypassing_cache.h): the peers read it next from
// other cores, and dirty lines pulled one by one from another core's cache ran at 2 GB/s
// here in half of the runs. At 4 ranks staging beats the process_vm_* path for every
// collective it takes (allgather 1.2-2.6x, reduce-scatter 1-1.7x, broadcast 1-1.8x, 256 KiB
// to 16 MiB); at 2 ranks allgather and broadcast keep process_vm_* where it works (one copy
// against two: 0.68-1.03x with staging).
//
// Buffers the peers map (ibex_comm_mem_alloc, allreduce/comm_memory.h). The announce
// round carries, for the buffers a rank's peers would read (its send buffer) or write (its
// receive buffer), the shared allocation they lie in, if any; each peer maps it once
// (ibex_rkey_ptr, cached by the allocation's id) and then reads and writes that rank's
// buffers in place: a rank whose send buffer is shared skips step 0 (its peers read its
// send buffer where they would read its input area), and one whose receive buffer is
// shared gets the results stored straight into it with cache-bypassing stores (its peers
// publish them only for ranks that copy them out in step 2, which it then skips). An
// allreduce of two ranks then moves, per rank, half the buffer in and half out and reduces
// in place, against three memcpy-speed passes staged. Without staging, the same mappings
// stand in for process_vm_readv/writev. Ranks whose buffers are ordinary memory take part
// as before, in the same collective.
//
// When it applies: a collective of at least IBEX_SHM_DIRECT_MIN bytes (default 64 KiB; the
// whole input or output for reduce-scatter and allgather)
// where the fast boxes are on and every rank could read every peer's memory at creation
// (agreed over the bootstrap). Where some rank cannot (ptrace scope, another user or PID
// namespace; IBEX_SHM_COPY=ring stands in for that), only what the staging takes runs
// here, since mapping a peer's memfd needs no ptrace rights. Those conditions are the same on every rank. What may
// differ per rank is the memory behind the buffers: the announce round carries whether
// each rank's buffers are memory its peers can reach — ordinary host memory, or the GPU
// staging buffers (pinned by registration) where every rank could read a page of such
// memory from every peer at creation — and if any rank's are not (cudaHostAlloc'd or
// device-mapped memory, which cross-memory attach may refuse), every rank sees it and all
// of them run the scheduled algorithm instead.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include <ibex/coll.h>

#include "allreduce/alloc_region.h"
#include "allreduce/comm_memory.h"
#include "allreduce/op.h"

namespace ibex::coll {

class ShmDirect {
public:
    // Collective over the bootstrap, after the fast boxes opened: exchanges pids and checks
    // that every rank can read every peer (off everywhere otherwise).
    ibex_status_t open(ibex_comm *c);
    bool enabled() const { return min_bytes_ != 0; }
    size_t min_bytes() const { return min_bytes_; }

    // The same answer on every rank for the same call.
    bool takes(const Op &op) const;
    // Whether an allreduce of this many bytes runs here (for ibex_comm_allreduce_algo).
    bool takes_allreduce(size_t bytes) const;
    // Every rank can read every peer with process_vm_readv (else only what stages runs here).
    bool cross_memory_attach() const { return cma_ok_; }
    // Starts op: the fast-box op to run first is sub().
    void begin(const Op &op);
    bool active() const { return phase_ != Phase::idle; }
    const Op &sub() const { return sub_; }
    // The fast-box round sub() finished: runs the next local phase and sets up the next
    // round (*done false), or ends (*done true). *fallback: some rank's buffers cannot be
    // read this way; op must run the scheduled way (the same on every rank).
    ibex_status_t advance(const Op &op, bool *done, bool *fallback);
    void abandon() {
        phase_ = Phase::idle;
        staging_now_ = false;
    }
    // Allreduces that ran this way to the end on this communicator.
    uint64_t taken() const { return taken_; }
    // Of those, the ones that went through the staging memory.
    uint64_t staged() const { return staged_; }
    // Bytes of staging each rank has (0: the staged allreduce is off).
    size_t stage_bytes() const { return stage_bytes_; }
    // Staged collectives in which this rank copied its input into its staging (step 0).
    uint64_t staged_in() const { return staged_in_; }
    // Collectives in which this rank reached a peer's buffer through a mapping of it.
    uint64_t mapped() const { return mapped_; }
    // The protection domain whose ibex_mem_alloc memory every peer maps (the shm link's),
    // or nullptr where the path is off: ibex_comm_mem_alloc's memory is plain then.
    ibex_pd_t *shared_pd() const;

private:
    enum class Phase { idle, announce, reduced };
    struct Announce {
        uint64_t send, recv, count;
        int32_t pid;
        uint32_t call;  // type | op << 8 | kind << 16
        uint32_t plain; // the buffers the peers touch are memory they can reach
        int32_t root;   // broadcast, reduce; else -1
        // The shared allocations (id 0: none) holding the send buffer, where peers read it,
        // and the receive buffer, where peers write it.
        CommMemory::Region send_region, recv_region;
    };
    static constexpr int kEveryone = -1, kNobody = -2;
    // process_vm_readv/writev of bytes between this rank's local and rank q's remote, to
    // the end (the kernel may move less per call).
    ibex_status_t cross(int q, void *local, uint64_t remote, size_t bytes, bool write) const;
    // Rank q's send buffer at byte offset at, read into dst (its mapping, else
    // process_vm_readv), and this rank's bytes written at byte offset at of q's receive
    // buffer (its mapping, with cache-bypassing stores, else process_vm_writev).
    ibex_status_t read_from(int q, void *dst, size_t at, size_t bytes) const;
    ibex_status_t write_to(int q, size_t at, const void *src, size_t bytes) const;
    // Maps the shared buffers the peers announced (send_at_, recv_at_).
    void map_peers();
    uint8_t *map_region(int q, const CommMemory::Region &r);
    // The local phase of op on this rank.
    ibex_status_t run_local(const Op &op);
    // The block loop of both ways below: count elements at byte offset src of every rank's
    // input, reduced in rank order block by block into out (nullptr: a scratch block).
    // load(q, at, bytes, scratch, &p) points p at rank q's block at byte offset at (into
    // scratch if it copies); after(result, at, bytes, offset in out) runs on each block.
    template <typename Load, typename After>
    ibex_status_t reduce_in_blocks(const Op &op, size_t src, uint8_t *out, size_t count, Load load, After after);
    // Reduces count elements at byte offset src of every rank's send buffer, in rank order
    // and block by block, into out (nullptr: a scratch block), pushing each result block to
    // the same offset of push_to's receive buffer (a rank, kEveryone or kNobody).
    ibex_status_t reduce_blocks(const Op &op, size_t src, uint8_t *out, size_t count, int push_to);
    // Allocates the staging memory and maps every peer's (collective; off for all when a
    // rank cannot).
    ibex_status_t open_staging(ibex_comm *c);
    void close_staging();
    // Steps 0, 1 and 2 of a staged collective (above).
    // Whether a collective of this kind and whole-buffer size goes through the staging.
    bool stages(OpKind kind, size_t whole) const;
    bool stage_in(const Op &op); // false: nothing to stage on this rank
    ibex_status_t run_staged(const Op &op);
    // Alltoall's local phase: block rank_ of every peer's send buffer (staged: from their
    // input areas where the buffer is not shared).
    ibex_status_t take_blocks(const Op &op, bool staged);
    void finish_staged(const Op &op);
    // Reduces count elements in rank order, block by block: rank q's input at byte offset
    // src of this rank's send buffer (q == rank_) or of q's input area, into out; each
    // result block also to publish (nullptr: nowhere) with cache-bypassing stores.
    // Rank q's input there: its send buffer through the mapping, else its input area.
    // Each result block also goes to the receive buffer of push_to (a rank, kEveryone or
    // kNobody) where that buffer is shared.
    ibex_status_t reduce_from_staging(const Op &op, size_t src, uint8_t *out, size_t count, uint8_t *publish,
                                      int push_to);
    // Rank q's buffer is shared: this rank reads it, or writes it, through a mapping (or
    // process_vm_*); it stages nothing for q and publishes nothing for it.
    bool send_shared(int q) const { return all_[static_cast<size_t>(q)].send_region.id != 0; }
    bool recv_shared(int q) const { return all_[static_cast<size_t>(q)].recv_region.id != 0; }
    // Rank q is a peer that push_to (a rank, kEveryone or kNobody) sends this rank's results.
    bool gets_results(int q, int push_to) const { return q != rank_ && (push_to == kEveryone || push_to == q); }

    size_t min_bytes_ = 0; // 0: off
    int rank_ = 0, nranks_ = 1;
    Phase phase_ = Phase::idle;
    Op sub_;
    Announce mine_{};
    std::vector<Announce> all_;
    std::vector<uint8_t> block_[4]; // peers' blocks (0, 1), partial sums (2), a result not kept (3)
    uint64_t taken_ = 0;
    bool pinned_ok_ = false; // every rank can read registered pinned memory of every peer
    bool cma_ok_ = false;    // every rank can read every peer (process_vm_readv)
    // Staged allreduce: this rank's staging, every rank's as mapped here (own at rank_).
    size_t stage_bytes_ = 0;
    AllocRegion stage_;
    std::vector<uint8_t *> stage_of_;
    bool staging_now_ = false; // the running collective is staged
    uint64_t staged_ = 0, staged_in_ = 0, mapped_ = 0;
    // Shared buffers: the communicator (its QPs map them), the shm link (-1: none), each
    // peer's send and receive buffer of the running collective as mapped here (nullptr:
    // not shared, or not mapped), and every mapping made, by (rank, allocation id).
    ibex_comm *comm_ = nullptr;
    int link_ = -1;
    std::vector<uint8_t *> send_at_, recv_at_;
    std::map<std::pair<int, uint64_t>, uint8_t *> maps_;
};

} // namespace ibex::coll
