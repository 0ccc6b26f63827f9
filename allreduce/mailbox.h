// Sends and receives between ranks of one host, through mailboxes. Each rank owns a region
// from ibex_mem_alloc on the shm device (a memfd its peers map), announced to every rank at
// creation: for each other rank of its host a ring of kSlots slots that only that rank
// writes, and one word per such rank saying how many of this rank's messages it has taken.
//
// Every send from a to b, when the two share a host over shm, takes the next slot of a's
// ring in b's region: a message of at most max_bytes is copied into it whole, after a
// header with its length, and the slot's sequence word is stored last (release); a longer
// one leaves only its length there (a notice) and moves by the executor's schedule, as
// before. The receiver takes slot after slot in order: it checks the length against its
// own receive, copies a whole message into the caller's buffer, and then stores the count
// it has taken into the sender's region (release), which frees the slot. A sender whose
// ring is full waits for that count. So a small message costs one copy in and one copy out
// with no work request, credit or completion; and every message, small or not, has its
// length checked against the receive before anything is written, even where a rank took
// the other side of max_bytes (the ranks called different lengths): the receiver fails
// at once, naming both lengths.
//
// Matching is the schedule's: the i-th send a issues to b is the i-th receive b issues
// from a (sequence numbers per ordered pair, over the communicator's life). Which messages
// go whole depends only on their length and on the limit every rank agreed on at creation
// (the smallest IBEX_MAILBOX_MAX), so both ends decide alike.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <ibex/coll.h>

#include "allreduce/alloc_region.h"
#include "allreduce/op.h"

namespace ibex::coll {

class Mailbox {
public:
    Mailbox() = default;
    ~Mailbox();
    Mailbox(const Mailbox &) = delete;
    Mailbox &operator=(const Mailbox &) = delete;

    // Sends to one rank that may go out before their receives are issued (as many as the
    // eager ring holds on the scheduled path).
    static constexpr uint64_t kSlots = 32;
    // A host with more ranks than this takes the scheduled path (each rank's region holds a
    // ring for every other rank of its host).
    static constexpr int kMaxLocalRanks = 32;

    // Collective over the bootstrap, after the executor's QPs are connected and before
    // anyone sends: allocates, registers and announces the region, maps the peers' and
    // agrees on the limit (off everywhere when any rank cannot take part).
    ibex_status_t open(ibex_comm *c);
    // Frees the region (before the executor's PD goes).
    void close();

    size_t max_bytes() const { return max_bytes_; }
    // Messages to and from `peer` go through the mailboxes.
    bool peer(int p) const {
        return max_bytes_ && p != rank_ && p >= 0 && p < nranks_ && local_[static_cast<size_t>(p)] >= 0;
    }
    // Every send and receive of the p2p op to another rank fits the mailboxes whole: the op
    // needs no schedule. Same answer on both ends of each message.
    bool carries_all(const Op &op) const;
    // Some send or receive of the p2p op is with a mailbox peer (whole or as a notice).
    bool carries_some(const Op &op) const;
    // Starts the mailbox part of a p2p op: its messages to and from mailbox peers. whole
    // (carries_all): also its copies to itself, the op having no schedule.
    ibex_status_t start(const Op &op, bool whole);
    // Moves what can move; *done once every message of the op is through (then inactive).
    // *moved: something moved in this look. An error: a receive whose length differs.
    ibex_status_t poll(bool *done, bool *moved);
    bool active() const { return pending_ > 0; }
    // The running op failed: forget its messages (the communicator is in error).
    void abandon() { pending_ = 0; }
    // The rank the first unfinished message waits on, or -1.
    int waiting_on() const;
    std::string stall_detail() const;
    // Messages that went through whole, and notices, since creation (tests, logs).
    uint64_t whole_messages() const { return whole_; }
    uint64_t notices() const { return notices_; }

private:
    struct Item {
        bool send;
        bool whole; // the data travels in the slot, not by the schedule
        bool done;
        int peer;
        uint8_t *buf;
        size_t bytes;
        uint64_t seq; // 1, 2, ... per ordered pair
    };
    // A slot: the sequence word, the message's length (kNotice set: the data goes by the
    // schedule), the data. Up to 48 bytes of data share a cache line with the word.
    static constexpr size_t kSeq = 0, kLength = 8, kData = 16;
    static constexpr uint64_t kNotice = uint64_t(1) << 63;
    size_t slot_offset(int from_local, uint64_t seq) const {
        return (static_cast<size_t>(from_local) * kSlots + (seq - 1) % kSlots) * slot_bytes_;
    }
    size_t taken_offset(int reader_local) const { return acks_at_ + static_cast<size_t>(reader_local) * 64; }
    bool try_send(Item &it);
    ibex_status_t try_receive(Item &it, bool *took);

    AllocRegion region_;
    uint8_t *box_ = nullptr; // region_.data() while open
    size_t max_bytes_ = 0;   // 0: off
    size_t slot_bytes_ = 0;
    size_t acks_at_ = 0;
    int rank_ = 0, nranks_ = 1;
    std::vector<int> local_;         // per rank: its index among this host's ranks (mailbox peers), or -1
    std::vector<uint8_t *> peer_box_; // per rank: its region as this process maps it
    std::vector<uint64_t> sent_, received_; // per peer: messages numbered so far
    std::vector<uint64_t> taken_;           // per peer: received messages taken out of the ring
    std::vector<Item> items_;        // the running op's messages
    size_t pending_ = 0;
    uint64_t whole_ = 0, notices_ = 0;
};

} // namespace ibex::coll
