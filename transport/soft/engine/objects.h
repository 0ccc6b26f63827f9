// The soft provider's objects. Each derives from its public handle struct, so a handle
// is the object. All mutable engine state of a context is guarded by its one mutex.
#pragma once

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "transport/completion_ring.h"
#include "transport/provider.h"
#include "transport/qp_attrs.h"
#include "transport/soft/engine/congestion_control.h"
#include "transport/soft/engine/loss_recovery.h"
#include "transport/soft/engine/work_queue.h"
#include "transport/soft/port.h"

namespace ibex::soft {

class SoftContext;

struct SoftPd : ibex_pd {
    SoftContext *ctx;
    int users = 0; // MRs and QPs created on it
};

struct SoftMr : ibex_mr {
    // CUDA device memory: the engine works on `host`, a pinned shadow of
    // [addr, addr + length) that engine/staging.h keeps coherent with the GPU. nullptr
    // for host memory, which the engine uses in place.
    uint8_t *host = nullptr;
    int device = -1;
    std::vector<std::pair<uint64_t, uint64_t>> dirty; // shadow ranges remote writes changed
};

// push(), arm() and the ring are CompletionRing's, called with the context lock held.
struct SoftCq : ibex_cq, CompletionRing {
    SoftContext *ctx = nullptr;
    int users = 0; // QPs attached

    explicit SoftCq(size_t capacity) : CompletionRing(capacity) {}
};

// Responder output that must leave in PSN order: READ responses (or their replays),
// atomic acknowledgements and NAKs. Plain ACKs are coalesced and sent after these drain,
// so an ACK never overtakes a response for an earlier PSN.
struct ResponseJob {
    enum class Kind : uint8_t { kRead, kAtomicAck, kNak } kind = Kind::kRead;
    uint32_t psn = 0;       // PSN of the first packet
    const uint8_t *src = nullptr;
    uint32_t len = 0;
    uint32_t rkey = 0;      // READ: what `src` was resolved from, at MR epoch `epoch`
    uint64_t va = 0;
    uint64_t epoch = 0;
    uint32_t npkts = 0;
    uint32_t next = 0;      // next packet index to send
    uint64_t orig = 0;      // atomic: original value
    uint8_t syndrome = 0;   // NAK: AETH syndrome
    bool selective = false; // NAK: a selective NAK, the hole ends at sack_end
    uint32_t sack_end = 0;
};

struct AtomicReplay {
    uint32_t psn = 0;
    uint64_t orig = 0;
    bool valid = false;
};

inline constexpr int kResponseJobs = 32;
inline constexpr int kAtomicReplays = 16;

struct SoftQp : ibex_qp, QpAttrs {
    SoftContext *ctx = nullptr;
    SoftCq *scq = nullptr;
    SoftCq *rcq = nullptr;
    bool sig_all = false;
    uint32_t mtu = 4096;
    NetAddr dest;
    uint32_t dest_qpn = 0;
    bool active = false; // listed in the context's service list

    // ---- requester
    Ring<SendWqe> sq;
    uint32_t sq_psn = 0;  // next PSN to assign to a posted WQE
    uint32_t una = 0;     // oldest PSN not yet acknowledged
    uint32_t sent_high = 0; // one past the highest PSN ever sent
    Controller window;    // the send window (congestion/window), set by add_qp
    uint64_t tx_pos = 0;  // WQE being transmitted
    uint32_t tx_pkt = 0;  // its next packet index
    int retry_left = 7;
    int rnr_left = 7;
    bool rewound = false;      // went back to `una` and has not progressed since
    uint64_t rto_deadline = 0; // ns, 0 = off
    uint64_t rnr_until = 0;    // ns: no requests before this (RNR back-off)
    std::unique_ptr<QpRate> rate; // DCQCN and pacing, when the context runs them
    // Selective mode (IBEX_RETRANSMIT=selective): ranges a selective NAK named missing,
    // resent before the cursor goes back to resume_psn; the tail timer (RTO_low); and
    // the in-flight cap, sized to the bandwidth-delay product (IBEX_BDP_BYTES).
    RetransmitMode mode = RetransmitMode::kGoBackN;
    RetransmitSet resend;
    bool resending = false;
    bool range_started = false; // the cursor sits in resend.front()
    uint32_t resume_psn = 0;
    TailTimer tail;
    uint32_t inflight_cap = 0; // packets; 0: no cap beyond the send window
    bool window_full = false;  // the last transmit pass stopped at the window
    RetransmitStats rtx;

    // ---- responder
    Ring<RecvWqe> rq;
    uint32_t epsn = 0;
    uint32_t msn = 0;
    bool nak_sent = false;
    enum class InMsg : uint8_t { kNone, kSend, kWrite } in_msg = InMsg::kNone;
    uint32_t in_offset = 0;   // bytes of the current message already placed
    uint8_t *in_write = nullptr;
    uint32_t in_write_len = 0;
    uint32_t in_write_rkey = 0; // what in_write was resolved from, at MR epoch in_write_epoch
    uint64_t in_write_va = 0;
    uint64_t in_write_epoch = 0;
    bool ack_pending = false;
    bool ack_lazy = false;      // no packet the pending ACK covers asked for one
    uint64_t ack_pass = 0;      // progress pass whose receive made the ACK pending
    uint64_t ack_due = 0;       // the pending ACK leaves by then even without a request
    uint32_t unacked_rx = 0;    // requests accepted since the last ACK went out
    uint32_t ack_psn = 0;
    ResponseJob jobs[kResponseJobs];
    int job_head = 0;
    int job_count = 0;
    AtomicReplay replays[kAtomicReplays];
    int replay_next = 0;
    // Selective mode: requests past a hole, held until it fills; the hole last named in
    // a selective NAK, and the packets held since (a NAK is repeated every
    // ooo.slots() / 4 packets while the same hole stays open: its resend was lost).
    OooWindow ooo;
    bool sack_named = false;
    uint32_t sack_epsn = 0;
    uint32_t sack_end = 0;
    uint32_t sack_since = 0;

    SoftQp(size_t send_cap, size_t recv_cap) : sq(send_cap), rq(recv_cap) {}

    // ---- state changes (engine/qp_state.cpp), context lock held
    // Back to a fresh RESET QP: both queues emptied, every connection's bookkeeping gone.
    void reset();
    // ibex_modify_qp after its checks passed: the attributes in `mask`, then the state
    // change to attr.qp_state (when mask has IBEX_QP_STATE). `dest` is the peer address
    // that attr.dest names, used when mask has IBEX_QP_DEST.
    void apply(const ibex_qp_attr_t &attr, unsigned mask, const NetAddr &dest);
};

} // namespace ibex::soft
