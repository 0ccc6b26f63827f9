// Small collectives among the ranks of one host, through "fast boxes": each rank owns a
// region from ibex_mem_alloc on the shm device (a memfd its peers map), registered once
// and announced to every peer at creation. A collective of at most max_bytes per rank then
// skips the schedule, credits and completions: every rank copies its contribution into
// its own staging slot, copies it into its slot of every peer's box, then the sequence
// word after it, and polls its own box until every peer's word shows this collective's
// number. The copies go straight into the peers' boxes through this process's mappings
// of them (ibex_rkey_ptr, taken at creation); where a box cannot be mapped they are
// WRITEs on the shm QP (which, in place, are the same memcpys behind the provider's
// checks and lock: about 50 ns a post). Reductions run in rank order over the slots, so every rank computes the same
// bits.
//
// Safety of reuse. Slots alternate by the sequence number's parity. Every rank writes
// its word to every peer in every fast collective and waits for every peer's word, so a
// rank starts collective s+2 only after seeing every peer's word of s+1, which each peer
// wrote after it had finished reading collective s: the slot of parity s is free again
// when s+2 overwrites it. The same holds for a rank's own staging slots: the peers' words
// of s+1 mean they saw its word of s, and that word follows its data on the same QP.
//
// Which collectives go this way depends only on the call's arguments and on settings all
// ranks agreed on at creation (the smallest IBEX_FASTBOX_MAX of all ranks), so every rank
// takes the same path for the same call; a rank whose call differs (count, type, op, root,
// collective) is named by the description each slot carries.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <ibex/coll.h>

#include "allreduce/alloc_region.h"
#include "allreduce/op.h"

namespace ibex::coll {

class Executor;

class Fastbox {
public:
    Fastbox() = default;
    ~Fastbox();
    Fastbox(const Fastbox &) = delete;
    Fastbox &operator=(const Fastbox &) = delete;

    static constexpr int kMaxRanks = 8; // every rank has a QP to every other

    // Whether this rank could use fast boxes (before any exchange): one host, every peer
    // over shm, 2..kMaxRanks ranks, no algorithm forced, IBEX_FASTBOX_MAX > 0.
    static bool wanted(const ibex_comm *c);
    // Collective over the bootstrap, after the executor's QPs are connected and before
    // anyone sends: allocates, registers and announces the box, and agrees on the limit
    // (off everywhere when any rank cannot take part).
    ibex_status_t open(ibex_comm *c);
    // Frees the box (before the executor's PD goes).
    void close();

    size_t max_bytes() const { return max_bytes_; }
    // Whether op runs over the boxes; the same answer on every rank for the same call.
    bool takes(const ibex_comm *c, const Op &op) const;
    // Sends this rank's contribution and sequence word to every peer.
    ibex_status_t start(ibex_comm *c, const Op &op);
    // Looks at the box; once every peer's word is there, computes the result into the
    // op's buffers and sets *done. *moved: some peer's word arrived in this look.
    ibex_status_t poll(const Op &op, bool *done, bool *moved);
    // The first rank whose word of the running collective has not arrived, or -1.
    int waiting_on() const;
    std::string stall_detail() const;
    // Collectives that went through the boxes on this communicator.
    uint64_t taken() const { return seq_; }

private:
    // What a slot's sender called, so that ranks calling different collectives fail
    // with a clear error instead of reading each other's slots wrongly.
    struct Meta {
        uint64_t count;
        uint32_t call; // kind | type << 8 | op << 16
        int32_t root;
    };
    // A slot: the sequence word, the description, the data. A collective of up to 40 bytes
    // fits one cache line with its word, so a peer's poll and read cost one line transfer.
    static constexpr size_t kSeq = 0, kMeta = 8, kData = 24;
    uint8_t *inbox(uint64_t seq, int from) const;
    uint8_t *outbox(uint64_t seq, int to) const;
    ibex_status_t finish(const Op &op, const uint8_t *own);
    static Meta describe(const Op &op);
    static std::string said(const Meta &m); // "allreduce of 8 f32 (sum)"

    Executor *exec_ = nullptr;
    AllocRegion region_;     // the box's memory
    uint8_t *box_ = nullptr; // region_.data() while open
    size_t max_bytes_ = 0; // 0: off
    size_t slot_bytes_ = 0; // kData + max_bytes_, rounded up to a cache line
    int rank_ = 0, nranks_ = 1;
    std::vector<uint64_t> peer_addr_;
    std::vector<uint32_t> peer_rkey_;
    // Each peer's box as this process maps it (ibex_rkey_ptr), or nullptr: WRITEs instead.
    std::vector<uint8_t *> peer_box_;
    bool logged_ = false;
    // Running collective.
    uint64_t seq_ = 0;
    std::vector<uint8_t> arrived_;
    int missing_ = 0;
};

} // namespace ibex::coll
