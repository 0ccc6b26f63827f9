// A soft RoCEv2 context: one port, the memory regions, CQs and RC QPs on it, the packet
// transmit batch, and the progress engine (inline in ibex calls, plus a thread that
// busy-polls briefly and then blocks when the application is not driving progress).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "transport/qp_attrs.h"
#include "transport/soft/codec/icrc_ip_id.h"
#include "transport/soft/codec/packet.h"
#include "transport/soft/engine/fault_injector.h"
#include "transport/soft/engine/mr_table.h"
#include "transport/soft/engine/objects.h"
#include "transport/soft/port.h"

namespace ibex::soft {

struct EngineConfig {
    // Unacknowledged PSNs per QP (IBEX_MAX_INFLIGHT). rxe uses 128; a software peer is
    // descheduled for milliseconds at a time on a busy host, so ibex keeps more in flight.
    uint32_t max_inflight = 512;
    uint32_t ack_req_every = 16;     // AckReq at least every N packets of a message
    // A plain ACK may wait this long, to acknowledge several requests at once or leave in
    // the batch of a request of its QP (IBEX_ACK_DELAY_US; 0: it leaves with the next
    // progress pass, as before). Completions of the peer's WRs can come that much later;
    // its window (32 unacknowledged requests at most) never waits for it.
    uint32_t ack_delay_us = 20;
    // Packets that did not ask for an ACK (the last packet of an unsignaled WR, a middle
    // packet) are acknowledged lazily: by this long after the first of them
    // (IBEX_ACK_LAZY_US), or in the batch of a request of their QP once several wait. Their
    // requester waits for no completion; the ACK only frees its send queue. Kept well
    // under the requester's RTO_low, so that no lazy ACK is taken for a loss.
    uint32_t ack_lazy_us = 200;
    uint32_t spin_us = 50;           // progress thread busy-poll before blocking (IBEX_POLL_SPIN_US)
    // The application counts as driving progress this long after its last ibex call; the
    // progress thread sleeps meanwhile. Long enough that its wake-ups cost little CPU.
    uint32_t app_idle_us = 1000;
    uint32_t tx_budget = 64;         // packets per QP per progress pass
    // Unacknowledged PSNs of all QPs of a context together (IBEX_MAX_INFLIGHT_CONTEXT),
    // shared evenly by the QPs with work: about half the 8 MiB socket buffer at 4 KiB MTU.
    uint32_t max_inflight_context = 1024;
    bool progress_thread = true;
    std::vector<unsigned> progress_cpus; // affinity of the progress thread; empty: any
    RateControlConfig rate;              // DCQCN (set by open_device, not from_env)
    // Loss recovery (IBEX_RETRANSMIT): go-back-N, the default, which every RoCEv2 peer
    // understands; or selective (IRN), see congestion/README.md.
    RetransmitMode retransmit = RetransmitMode::kGoBackN;
    // Selective mode: the tail timeout RTO_low (IBEX_RTO_LOW_US), used while at most 3
    // packets are unacknowledged; and the bandwidth-delay product (IBEX_BDP_BYTES) that
    // caps each QP's packets in flight and sizes its out-of-order store (that many bytes
    // of packets, preallocated per QP when it is connected).
    uint32_t rto_low_us = 1000;
    uint32_t bdp_bytes = 512 * 1024;
    PathDefaults path; // new QPs' traffic class and service level

    // The two windows and ack_req_every above are byte counts written as packets of 4 KiB:
    // at a smaller path MTU (1 KiB on a 1500-byte netdev) the same bytes stay in flight, four
    // times the packets, or the sender stalls whenever a receiver is off the CPU for a
    // fraction of a millisecond; and an ACK is asked for every 64 KiB, not four times as
    // often. A count set from the environment stays as set.
    void fit_to_mtu(uint32_t mtu_bytes);
    bool max_inflight_from_env = false, max_inflight_context_from_env = false, ack_req_every_from_env = false;

    static EngineConfig from_env();
};

class SoftContext : public ibex_context {
public:
    SoftContext(std::unique_ptr<Port> port, const EngineConfig &cfg);
    ~SoftContext();
    SoftContext(const SoftContext &) = delete;
    SoftContext &operator=(const SoftContext &) = delete;

    void start();          // starts the progress thread if configured
    void stop();

    std::mutex &mutex() { return mu_; }
    Port &port() { return *port_; }
    const EngineConfig &config() const { return cfg_; }
    MrTable &mrs() { return mrs_; }
    ibex_counters_t &counters() { return counters_; }
    // The counters with the port's own (lock held).
    ibex_counters_t snapshot() const;
    FaultInjector &faults() { return faults_; }
    int &live_objects() { return live_objects_; } // PDs and CQs (lock held)

    // ---- objects (lock held)
    uint32_t add_qp(SoftQp *qp);  // returns the QPN
    void remove_qp(SoftQp *qp);
    SoftQp *find_qp(uint32_t qpn) const;
    const std::vector<SoftQp *> &qps() const { return qps_; } // by QPN; holes are nullptr
    void activate(SoftQp *qp);    // puts a QP on the service list

    // ---- progress (lock held)
    bool progress_once();
    // Runs the QP's timers and sends at most max_packets; returns how many it sent.
    uint32_t service_qp(SoftQp &qp, uint64_t now, uint32_t max_packets = UINT32_MAX);
    void flush_tx();
    // After a post_send: the QP's requests leave from the caller's thread, the
    // lowest-latency path, and the QP stays serviced until it has nothing left.
    void transmit_now(SoftQp &qp);
    void note_app_progress();
    uint64_t pass() const { return pass_; }
    // QPs with work or timers: they share the context-wide in-flight budget (lock held).
    uint32_t active_qps() const { return static_cast<uint32_t>(active_.size()); }
    bool deferring_acks() const { return deferring_acks_; }
    void app_went_idle();

    // ---- receive path (lock held); public for the fuzz target and tests
    void receive(const RxPacket &pkt);

    // ---- transmit helpers used by the QP logic (lock held)
    struct TxSlot {
        uint8_t hdr[64];
        uint8_t trailer[8];
        TxPacket pkt;
    };
    TxSlot &begin_tx();
    // Finishes the packet in `slot`: hdr_len bytes of headers in slot.hdr (BTH pad count
    // already set), payload pieces already in pkt.pieces[1..npayload].
    void commit_tx(TxSlot &slot, const SoftQp &qp, size_t hdr_len, int npayload, uint32_t payload_len);
    // Computes a committed packet's ICRC into its trailer (the last 4 bytes of its last piece).
    void store_tx_icrc(TxPacket &p) const;
    // Notification point: a CNP to the QP's peer (its sender QP), at the CNP DSCP.
    void send_cnp(const SoftQp &qp);

    static uint64_t now_ns();

private:
    void progress_thread_main();
    uint64_t next_deadline() const;

    std::unique_ptr<Port> port_;
    bool port_fills_icrc_;
    EngineConfig cfg_;
    std::mutex mu_;
    MrTable mrs_;
    ibex_counters_t counters_{};
    roce::IcrcIpIdShift icrc_ip_id_; // the receive path's: an ICRC for another IP ID
    FaultInjector faults_;
    int live_objects_ = 0;

    std::vector<SoftQp *> qps_;       // index = qpn - kQpnBase
    std::vector<SoftQp *> active_;    // QPs with work or timers
    uint32_t qpn_base_;

    static constexpr uint32_t kPassBudget = 256; // packets sent per progress pass, all QPs
    static constexpr uint64_t kStagingPollNs = 20000; // a WR waiting for its GPU staging copy
    static constexpr size_t kTxBatch = kMaxTxBatch; // slots; the port says how many make a flush
    std::array<TxSlot, kTxBatch> tx_slots_;
    std::array<TxPacket, kTxBatch> tx_pkts_;
    size_t tx_count_ = 0;
    size_t tx_batch_ = 32; // the port's tx_batch()
    std::vector<TxPacket> tx_faulted_;

    static constexpr size_t kRxBatch = 32;
    std::array<RxPacket, kRxBatch> rx_pkts_;
    roce::IcrcPrefixCache rx_icrc_prefix_;

    uint64_t pass_ = 0;
    bool deferring_acks_ = false;
    std::atomic<uint64_t> last_app_progress_{0};
    std::atomic<bool> stopping_{false};
    std::thread thread_;
    int epoll_fd_ = -1;
    int wake_fd_ = -1;
};

SoftContext *to_soft(ibex_context *ctx);

} // namespace ibex::soft
