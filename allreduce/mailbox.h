// Sends and receives between ranks of one host, through mailboxes. Each rank owns a region
// from ibex_mem_alloc on the shm device (a memfd its peers map), announced to every rank at
// creation: for each other rank of its host a ring of kSlots slots that only that rank
// writes, and one word per such rank saying how many of this rank's messages it has taken.
//
// Every send from a to b, when the two share a host over shm, takes the next slot of a's
// ring in b's region: a message of at most max_bytes is copied into it whole, after a
// header with its length, and the slot's sequence word is stored last (release); a longer
// one leaves its length and the address of a's buffer there, and b copies it straight out
// of a's address space with process_vm_readv (one copy, as Open MPI's vader does past its
// fast boxes). The receiver takes slot after slot in order: it checks the length against
// its own receive, copies the message into the caller's buffer, and then stores the count
// it has taken into the sender's region (release), which frees the slot and, for a message
// read out of the sender's buffer, completes the send. A sender whose ring is full waits
// for that count. So a message costs its copies and no work request, credit or completion;
// and every message has its length checked against the receive before anything is
// written, even where the ranks took different sides of max_bytes: the receiver fails at
// once, naming both lengths. Where some rank of the host cannot read its peers
// (process_vm_readv refused: ptrace scope, IBEX_SHM_COPY=ring, IBEX_MAILBOX_READ=0), a
// message past max_bytes leaves only its length (a notice) and moves by the executor's
// schedule as before.
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
    // Some ranks of the communicator use mailboxes (the same answer on every rank): an
    // alltoallv then runs as sends and receives everywhere, so that a pair with one end on
    // a host of mailboxes and the other elsewhere builds the same transfers at both ends.
    bool on_some_host() const { return on_some_host_; }
    // Messages to and from `peer` go through the mailboxes.
    // Messages past max_bytes are read out of the sender's buffer (else scheduled).
    bool reads() const { return reads_; }
    bool peer(int p) const {
        return max_bytes_ && p != rank_ && p >= 0 && p < nranks_ && local_[static_cast<size_t>(p)] >= 0;
    }
    // Every send and receive of the p2p op to another rank goes through the mailboxes whole
    // or read: the op needs no schedule. Same answer on both ends of each message.
    bool carries_all(const Op &op) const;
    // This message moves by the executor's schedule (the same on both ends).
    bool scheduled(const P2pPiece &p) const { return !peer(p.peer) || (p.bytes > max_bytes_ && !reads_); }
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
    // Messages sent whole, sent to be read, and sent as notices, since creation (tests).
    uint64_t whole_messages() const { return whole_; }
    uint64_t read_messages() const { return read_; }
    uint64_t notices() const { return notices_; }

private:
    enum class Carry : uint8_t { whole, read, notice };
    struct Item {
        bool send;
        Carry carry;
        bool posted; // a send to be read: its slot is written, its receiver not done yet
        bool done;
        int peer;
        uint8_t *buf;
        size_t bytes;
        uint64_t seq; // 1, 2, ... per ordered pair
    };
    // A slot: the sequence word, the message's length with its carry in the top bits, the
    // data (whole) or the sender's buffer address (read). Up to 48 bytes of data share a
    // cache line with the word.
    static constexpr size_t kSeq = 0, kLength = 8, kData = 16;
    static constexpr uint64_t kNotice = uint64_t(1) << 63, kRead = uint64_t(1) << 62;
    static Carry carry_of(uint64_t length_word) {
        return length_word & kNotice ? Carry::notice : length_word & kRead ? Carry::read : Carry::whole;
    }
    size_t slot_offset(int from_local, uint64_t seq) const {
        return (static_cast<size_t>(from_local) * kSlots + (seq - 1) % kSlots) * slot_bytes_;
    }
    size_t taken_offset(int reader_local) const { return acks_at_ + static_cast<size_t>(reader_local) * 64; }
    bool try_send(Item &it);
    ibex_status_t try_receive(Item &it, bool *took);

    AllocRegion region_;
    uint8_t *box_ = nullptr; // region_.data() while open
    size_t max_bytes_ = 0;   // 0: off
    bool on_some_host_ = false;
    bool reads_ = false;
    uint64_t probe_ = 0;     // a word peers read with process_vm_readv at creation
    std::vector<int> pid_;   // per mailbox peer
    size_t slot_bytes_ = 0;
    size_t acks_at_ = 0;
    int rank_ = 0, nranks_ = 1;
    std::vector<int> local_;         // per rank: its index among this host's ranks (mailbox peers), or -1
    std::vector<uint8_t *> peer_box_; // per rank: its region as this process maps it
    std::vector<uint64_t> sent_, received_; // per peer: messages numbered so far
    std::vector<uint64_t> taken_;           // per peer: received messages taken out of the ring
    std::vector<uint64_t> seen_taken_;      // per peer: its count of this rank's messages, as last read
    std::vector<Item> items_;        // the running op's messages
    size_t pending_ = 0;
    uint64_t whole_ = 0, read_ = 0, notices_ = 0;
};

} // namespace ibex::coll
