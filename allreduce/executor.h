// The data path of a communicator: one RC QP per peer the algorithms use, and the engine
// that runs a Schedule over them. A peer is reached through one of up to two links (device
// context, PD and CQ each): the communicator's device, or the shm device for a rank of
// the same host. Channels carry their link; completions of both CQs are handled alike.
//
// Direct schedules (Schedule::direct, GDRAA's) need no credits: each send names where it
// lands, the peer's landing zone (announced once) or its recvbuf (announced on change).
//
// Credits: a receiver announces, per step, where the sender may write (address, rkey,
// length) in a small inline SEND. Small slices skip that round trip: each receiver
// announces once, at connection, a ring of eager slots; the sender writes a slice of up to
// eager_bytes into the next slot at once, and the receiver hands consumed slots back in
// batches (one SEND per half ring), so a latency-bound collective pays one message latency
// per step instead of two. For a plain copy that is the user's own recvbuf (zero
// copy); for a reduction it is a staging slot, folded into place by the reduction itself.
// The sender then moves the bytes with one RDMA WRITE_WITH_IMM whose immediate carries
// the sequence number, so the receiver learns "slice landed" from its CQ alone. Sequence
// numbers run over the life of the communicator: a peer that is already in the next
// collective queues its credits and nothing is ever written before it was announced.
#pragma once

#include <cstdint>
#include <deque>
#include <span>
#include <string>
#include <vector>

#include <ibex/ibex.h>

#include "allreduce/alloc_region.h"
#include "allreduce/reg_cache.h"
#include "allreduce/schedule.h"
#include "runtime/qp_connect.h"

namespace ibex::coll {

struct ExecutorParams {
    size_t slice_bytes = 128 << 10; // largest transfer per WR, and staging slot size
    int slots = 8;                  // staging slots per peer
    int window = 16;                // credits outstanding per peer
    size_t eager_bytes = 32 << 10;  // slices up to this go to eager slots (0: never)
    int eager_slots = 32;           // eager ring slots per peer
    size_t zone_bytes = 0;          // GDRAA landing zone per peer, announced once (0: none)
    int sq_depth = 0;               // send WRs per QP (0: room for the window, eager ring and control)
};

class Executor {
public:
    Executor() = default;
    ~Executor();
    Executor(const Executor &) = delete;
    Executor &operator=(const Executor &) = delete;

    // Opens the device for the peers not marked in local (indexed by rank), and local_device
    // (when given) for those marked; each opened device is a link (0, then 1). Creates a QP
    // to each peer on its link.
    ibex_status_t open(const char *device, const char *local_device, int rank, int nranks,
                       const std::vector<int> &peers, const std::vector<uint8_t> &local, const ExecutorParams &params);
    // This rank's QP address for each rank (zeroed where there is no QP).
    std::vector<ibex_ep_addr_t> local_addrs();
    // remote[p]: peer p's QP address for this rank. Connects and posts receives, for the
    // channels from index `first` on (those add_peers made, or all).
    ibex_status_t connect(const std::vector<ibex_ep_addr_t> &remote, const QpChoice &choice, size_t first = 0);
    // Tells the peers of the channels from `first` on where its eager ring is; once every
    // rank has connected them.
    ibex_status_t announce(size_t first = 0);
    // Channels to more peers, after open, while no collective runs (the first alltoall
    // connects every pair): each with memory of its own, on the link open() chose for its
    // kind of peer, which is opened now if no peer needed it before. *first: the index of
    // the first new channel, for connect() and announce().
    ibex_status_t add_peers(const std::vector<int> &peers, size_t *first);
    size_t channels() const { return chans_.size(); }

    static constexpr int kMaxLinks = 2;
    int links() const { return nlinks_; }
    ibex_context_t *context(int link = 0) const { return links_[link].ctx; }
    ibex_pd_t *pd(int link = 0) const { return links_[link].pd; }
    // The link a peer is reached through, or -1 (no QP).
    int link_of(int peer) const {
        return connected_to(peer) ? chans_[static_cast<size_t>(chan_of_[static_cast<size_t>(peer)])].link : -1;
    }
    // The one link every rank p with want(p) (this rank left out) is reached through, or -1
    // (one has no QP, or two differ).
    template <class Want> int common_link(Want &&want) const {
        int link = -1;
        for (int p = 0; p < nranks_; ++p) {
            if (p == rank_ || !want(p)) continue;
            const int l = link_of(p);
            if (l < 0 || (link >= 0 && l != link)) return -1;
            link = l;
        }
        return link;
    }
    const ExecutorParams &params() const { return params_; }
    // The slice and staging slots per peer, decided once the links are open (their devices
    // say how long a message should be): before any channel has taken its staging.
    ibex_status_t set_slicing(size_t slice_bytes, int slots);
    bool connected_to(int peer) const { return peer >= 0 && peer < nranks_ && chan_of_[peer] >= 0; }
    // The QP to a peer, or nullptr.
    ibex_qp_t *qp_to(int peer) const {
        return connected_to(peer) ? chans_[static_cast<size_t>(chan_of_[static_cast<size_t>(peer)])].qp : nullptr;
    }

    // RDMA WRITEs to one peer outside any schedule (the fast boxes, allreduce/fastbox.h),
    // unsignalled and posted as one chain: they land in order, and on shm a chain between
    // mapped allocations is copied inside the one post. A failed one still completes, and
    // fails the communicator like any other completion.
    struct WritePiece {
        const void *src;
        size_t bytes;
        uint64_t remote;
    };
    ibex_status_t write_to(int peer, std::span<const WritePiece> pieces, uint32_t lkey, uint32_t rkey);

    // Takes over a schedule; keys come from the caches, one per link (the buffers must
    // already be in them).
    // timed: done_times() is wanted (a clock read per step otherwise saved).
    ibex_status_t start(const Schedule &s, ibex_datatype_t type, ibex_redop_t op, RegCaches &caches,
                        bool timed = false);
    bool active() const { return active_; }
    bool finished() const { return active_ && done_ == sched_.steps.size(); }
    void finish() { active_ = false; }
    // steady-clock ns at which each step finished (complete once finished(); empty unless
    // started timed)
    const std::vector<uint64_t> &done_times() const { return done_ns_; }
    // Control messages (credits, eager ring announcements and returns, landing zones,
    // readies) this rank has sent, over the executor's life.
    uint64_t control_messages() const { return control_sent_; }
    // Sends a full send queue refused out of a chain, posted again later (for tests).
    uint64_t sends_taken_back() const { return taken_back_; }

    // One pass: drain the CQ, then move every step that can move. *did: anything happened.
    ibex_status_t progress(bool *did);
    // Prepares to sleep: true when it is safe to block on cq_fds() (nothing pending in any CQ).
    bool arm();
    std::vector<int> cq_fds() const;
    // After a failure: moves every QP to the error state, so nothing a peer still has in
    // flight lands in user memory the caller gets back, and our own sends are flushed.
    void shut_down();
    // A rank this rank is still waiting on (for error messages), or -1.
    int waiting_on() const;
    // Where each channel of the running collective stands (for a timeout's log line).
    std::string stall_detail() const;

private:
    // Every control message. credit: seq is the data sequence number the announced
    // buffer is for. eager_ring: the receiver's ring (addr, rkey, len = slot bytes, seq =
    // slots). eager_return: seq = eager slots consumed so far, over the channel's life.
    // zone: the receiver's landing zone for direct schedules (addr, rkey, len). ready: the
    // receiver's recvbuf for direct schedules from now on (addr, rkey, len), sent when it
    // changes.
    enum class Ctl : uint32_t { credit = 0, eager_ring = 1, eager_return = 2, zone = 3, ready = 4 };
    struct Credit {
        uint32_t seq;
        uint32_t len;
        uint64_t addr;
        uint32_t rkey;
        Ctl kind;
    };
    struct Link {
        ibex_context_t *ctx = nullptr;
        ibex_pd_t *pd = nullptr;
        ibex_cq_t *cq = nullptr;
        int cq_fd = -1;
        // The memory of its channels' staging slots and eager rings, one allocation each,
        // carved per channel (alloc_region.h says why); staging is allocated at first use.
        // eager_tx: the channels' send buffers for copied slices, one allocation shared with
        // same-host peers like the others, so over shm a peer that serves such a WRITE as a
        // request copies out of its mapping instead of pulling with process_vm_readv.
        AllocRegion staging, eager, zone, eager_tx;
        int channels = 0;
    };
    struct Channel {
        // A channel add_peers made: its eager ring, send buffers and staging are its own
        // allocations, not slices of the link's (which were sized for open()'s channels).
        // First, so they are freed after the slices registered on them.
        bool late = false;
        AllocRegion own_eager, own_eager_tx, own_staging;
        int rank = -1;
        int link = 0;
        int on_link = 0; // its place among the link's channels: its slice of the link's memory
        ibex_qp_t *qp = nullptr;
        // Receive pool: credits and WRITE_WITH_IMM notifications both consume one.
        std::vector<uint8_t> rx;
        ibex_mr_t *rx_mr = nullptr;
        // Staging slots for incoming slices that are reduced on arrival.
        RegisteredSlice staging;
        std::vector<int> free_slots;
        // Lifetime sequence numbers of data messages (eager or not), both directions.
        uint32_t send_seq = 0, arrive_seq = 0;
        uint32_t recv_base = 0; // arrive_seq at the start of the running collective
        std::deque<Credit> credits;
        // This rank's eager ring (the peer writes into it) and what is consumed / handed back.
        RegisteredSlice eager;
        uint32_t eager_arrived = 0, eager_consumed = 0, eager_returned = 0;
        // Slices that came before their collective (the peer is one ahead): eager ones in
        // their slots, direct ones in the landing zone (kEarlyDirect set); their lengths.
        static constexpr uint32_t kEarlyDirect = 1u << 31;
        std::deque<uint32_t> early;
        std::vector<int> eager_slot_of; // per recv index: the eager slot it landed in, or -1
        // The peer's ring, as announced, and how many of its slots this rank has used.
        bool peer_eager_known = false;
        uint64_t peer_eager_addr = 0;
        uint32_t peer_eager_rkey = 0, peer_eager_slot_bytes = 0, peer_eager_slots = 0;
        uint32_t eager_sent = 0, eager_freed = 0;
        // Send buffers for eager slices (as many as this rank's own ring has slots); one is
        // reused once the send that used it completed.
        RegisteredSlice eager_tx;
        uint32_t eager_tx_done = 0;
        uint32_t tx_bounced = 0; // sends from those buffers (eager, and small direct ones), in order
        // The running collective's steps with this peer, in order.
        std::vector<int> sends, recvs;
        std::vector<int> slot_of; // per recv index
        size_t next_send = 0, next_credit = 0, next_arrival = 0, next_apply = 0;
        // Direct schedules (Schedule::direct): this rank's landing zone for the peer, the
        // peer's for this rank, the recvbuf each side last announced, and data in flight.
        RegisteredSlice zone;
        bool peer_zone_known = false;
        uint64_t peer_zone_addr = 0;
        uint32_t peer_zone_rkey = 0, peer_zone_bytes = 0;
        Credit announced{}, peer_recvbuf{}; // kind ready once announced
        uint64_t data_posted = 0, data_done = 0;
    };

    // A channel's sends of one pass, posted as one chain: one doorbell, which the soft
    // provider turns into one system call for all of them (a message cut into eager slices
    // over udp: 16 KiB 26 -> 22.6 us, 32 KiB 52.6 -> 42 us). Each entry keeps what staging
    // it counted, so that the part a full send queue refuses is taken back for a later pass.
    struct SendChain {
        static constexpr int kMax = 16;
        enum class How : uint8_t { eager, bounced, direct, credited };
        ibex_sge_t sge[kMax];
        ibex_send_wr_t wr[kMax];
        int step[kMax];
        How how[kMax];
        Credit credit[kMax]; // credited: the credit it took
        int n = 0;
    };
    // Posts the chain and empties it; *full: the send queue took only part of it (the rest
    // is taken back: counters, credits, done flags).
    ibex_status_t post_chain(Channel &c, SendChain &chain, bool *full);
    ibex_status_t post_recv(Channel &c, uint32_t idx);
    // Points the WR at the channel's next send buffer (eager_tx), with st's bytes copied in
    // (the caller checked that one is free); its completion frees the buffer (kEagerData).
    ibex_status_t send_from_copy(Channel &c, size_t ci, const Step &st, ibex_sge_t *sge, ibex_send_wr_t *wr);
    ibex_status_t send_control(Channel &c, size_t ci, const Credit &m);
    bool is_eager(size_t bytes) const { return params_.eager_bytes && bytes <= params_.eager_bytes; }
    ibex_status_t ensure_staging(Channel &c);
    ibex_status_t open_link(Link &l, const char *device, int cqe);
    // The link of a peer's kind (the device, or local_device for a rank of this host),
    // opened with a CQ for every rank of that kind: -1 when it cannot be.
    ibex_status_t link_for(int peer, int *link);
    // Opens the link of a kind of peer (0: the device, 1: local_device).
    ibex_status_t open_kind(int kind, int *link);
    // A channel's QP, receive pool and slices of eager memory (eager, eager_tx: its ring and
    // send buffers, zone: its landing zone; nullptr where there is none).
    ibex_status_t setup_channel(Channel &c, uint8_t *eager, uint8_t *eager_tx, uint8_t *zone);
    // Folds a slice that landed in a staging or eager slot into the step's destination.
    ibex_status_t reduce_landed(const Step &st, const uint8_t *landed);
    ibex_status_t handle(const ibex_wc_t &wc, bool *did);
    ibex_status_t advance(bool *did);
    ibex_status_t arrived(Channel &c, const ibex_wc_t &wc);
    ibex_status_t match_arrival(Channel &c, bool eager, uint32_t byte_len);
    bool ready(const Step &s) const {
        for (int d : s.dep)
            if (d >= 0 && !done_flag_[static_cast<size_t>(d)]) return false;
        return true;
    }
    void mark_done(int i);
    void unmark_done(int i); // a step marked done whose post the send queue refused

    int rank_ = 0, nranks_ = 1;
    ExecutorParams params_;
    // What open() was given, for add_peers: the devices, which ranks share this host, and
    // which link each kind of peer (0: the device, 1: local_device) is on (-1: none yet).
    std::string device_, local_device_;
    std::vector<uint8_t> local_;
    int link_of_kind_[2] = {-1, -1};
    Link links_[kMaxLinks];
    int nlinks_ = 0;
    std::vector<Channel> chans_;
    std::vector<int> chan_of_; // rank -> index in chans_, or -1
    std::vector<int> qpn_chan_; // small map qp_num -> channel, searched linearly
    bool shut_ = false; // after shut_down(): completions are drained and ignored
    // Running collective.
    bool active_ = false;
    // Started and not yet advanced: its first sends go out before the CQs are polled (an
    // empty poll is a syscall on the soft devices, a microsecond or two before the data).
    // Only when every send is eager: a larger slice posted before the poll can find the
    // last op's request still unacknowledged and follow it as a request (RC order), which
    // a same-host peer then pulls from ordinary memory instead of the sender copying it.
    bool fresh_ = false;
    Schedule sched_;
    ibex_datatype_t type_ = IBEX_U8;
    ibex_redop_t op_ = IBEX_SUM;
    size_t elem_ = 1;
    std::vector<uint8_t> done_flag_;
    std::vector<uint64_t> done_ns_;
    bool timed_ = false;
    std::vector<uint32_t> lkey_, rkey_;
    std::vector<int> locals_;
    size_t next_local_ = 0;
    size_t local_copied_ = 0;     // bytes of the local step at next_local_ already copied
    bool local_in_pieces_ = false; // that step goes a piece per pass (set at its first piece)
    size_t done_ = 0;
    std::vector<int> op_chans_;
    uint64_t control_sent_ = 0;
    uint64_t taken_back_ = 0;
};

} // namespace ibex::coll
