// The pieces of IRN-style loss recovery (Mittal et al., SIGCOMM 2018) that the soft RC
// engine runs in IBEX_RETRANSMIT=selective mode, each free of any packet or clock so
// that it can be tested alone:
//   - OooWindow: the responder's out-of-order store. Packets that arrive past a hole are
//     copied into slots preallocated when the QP is connected (none per packet) and
//     executed in PSN order once the hole fills.
//   - RetransmitSet: the requester's list of PSN ranges a selective NAK named missing,
//     resent before anything new; a repeated NAK for a range already resent is ignored.
//   - TailTimer: IRN's RTO_low, a short timer that runs only while a few packets
//     (kTailPackets, IRN's N = 3) are unacknowledged or the requester has sent all it has,
//     so a lost tail costs RTO_low and not the transport timeout. Its firings never count
//     against retry_cnt.
// How a selective NAK travels on the wire is described in congestion/README.md.
#pragma once

#include <cstdint>
#include <vector>

namespace ibex::soft {

enum class RetransmitMode : uint8_t { kGoBackN, kSelective };

// Parses IBEX_RETRANSMIT's value ("gbn" or "selective"); false if it is neither.
bool parse_retransmit_mode(const char *s, RetransmitMode &out);
const char *retransmit_mode_name(RetransmitMode m);

class OooWindow {
public:
    // Sizes the store for `slots` packets of up to `slot_bytes` each (the only
    // allocation; done when a QP is connected). slots 0 turns the store off.
    void configure(uint32_t slots, uint32_t slot_bytes);
    uint32_t slots() const { return static_cast<uint32_t>(tags_.size()); }
    uint32_t held() const { return held_; }
    bool empty() const { return held_ == 0; }

    // Holds the packet `distance` PSNs past the expected PSN `epsn` (1 <= distance <
    // slots()). False (nothing held) if it is outside the window, too long, or a copy of
    // that PSN is already held.
    bool hold(uint32_t epsn, uint32_t distance, const uint8_t *data, uint32_t len);
    // The packet held for exactly `psn`, or nullptr. `len` gets its length.
    const uint8_t *find(uint32_t psn, uint32_t &len) const;
    // Forgets the packet held for `psn` (after it was executed), if any.
    void release(uint32_t psn);
    // Forgets every held packet before `epsn` (a READ or a retry moved past them).
    void drop_before(uint32_t epsn);
    // The lowest held PSN after `epsn`, i.e. where the hole that starts at `epsn` ends;
    // false if nothing is held.
    bool first_after(uint32_t epsn, uint32_t &psn) const;
    void clear();

private:
    uint32_t slot_bytes_ = 0;
    std::vector<uint8_t> bytes_;    // slots * slot_bytes
    std::vector<uint32_t> tags_;    // PSN held in each slot
    std::vector<uint32_t> lens_;    // 0: slot empty
    uint32_t held_ = 0;
};

class RetransmitSet {
public:
    static constexpr int kRanges = 16;
    struct Range {
        uint32_t begin = 0; // first PSN to resend
        uint32_t end = 0;   // one past the last
    };

    // Adds [begin, end) unless it is already covered by ranges added since the last
    // reset(); a partly covered range is trimmed to its new part. False if nothing was
    // added (already covered, empty, or the set is full: the timers then recover).
    bool add(uint32_t begin, uint32_t end);
    bool empty() const { return count_ == 0; }
    int size() const { return count_; }
    const Range &front() const { return ranges_[head_]; }
    void pop();
    // Drops ranges, or their parts, below `una` (acknowledged meanwhile). True if the
    // front range was dropped whole.
    bool acked(uint32_t una);
    // Forgets everything, and what was covered (after a timeout goes back to una).
    void reset(uint32_t una);
    uint32_t covered_end() const { return covered_end_; }

private:
    Range ranges_[kRanges];
    int head_ = 0;
    int count_ = 0;
    uint32_t covered_end_ = 0;
    bool covered_valid_ = false;
};

class TailTimer {
public:
    static constexpr uint32_t kTailPackets = 3; // IRN's N
    static constexpr int kMaxBackoff = 6;       // RTO_low doubles at most this often
    static constexpr uint32_t kIdlePackets = 16; // in flight per RTO_low when idle

    void set_rto_low(uint64_t ns) { rto_low_ns_ = ns; }
    uint64_t rto_low() const { return rto_low_ns_; }
    // After a send or an acknowledgement: runs (from `now`) while 0 < inflight <= N, or
    // while anything is in flight and the requester has nothing more to send (`idle`):
    // IRN counts on an ACK per packet, which drains in flight down to the lost ones; ibex
    // coalesces ACKs (AckReq every IBEX_ACK_REQ_EVERY packets and on a message's last),
    // so a lost last packet leaves a whole message unacknowledged. Stops otherwise. An
    // acknowledgement (`progress`) also ends the back-off.
    void update(uint64_t now, uint32_t inflight, bool progress, bool idle = false);
    // True once when the deadline has passed; the timer then re-arms with a doubled
    // RTO_low, so a peer that is merely slow is not flooded.
    bool fire(uint64_t now);
    uint64_t deadline() const { return deadline_; }
    void stop() { deadline_ = 0; }

private:
    uint64_t rto_low_ns_ = 0; // 0: off
    uint64_t deadline_ = 0;
    int backoff_ = 0;
};

// Per-QP retransmission counters (ibex_qp_retransmit_t).
struct RetransmitStats {
    uint64_t timeouts = 0;       // transport timeouts (RTO)
    uint64_t tail_timeouts = 0;  // RTO_low firings
    uint64_t naks_sent = 0;      // sequence NAKs sent by the responder
    uint64_t naks_received = 0;  // sequence NAKs received by the requester
    uint64_t packets_resent = 0;
    uint64_t ooo_held = 0;       // packets the responder held out of order
};

} // namespace ibex::soft
