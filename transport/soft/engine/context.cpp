#include "transport/soft/engine/context.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <pthread.h>
#include <sched.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "runtime/base/config.h"
#include "runtime/base/log.h"
#include "transport/soft/codec/crc32_wide.h"
#include "transport/soft/codec/icrc.h"
#include "transport/soft/engine/qp_logic.h"
#include "transport/soft/engine/staging.h"
#include "transport/soft/tx_copy.h"

namespace ibex::soft {

using namespace ibex::roce;

namespace {
constexpr uint8_t kEcnEct0 = 0x2;
constexpr uint8_t kEcnCe = 0x3;
constexpr size_t kMaxQps = 1 << 16;
// The progress thread's looks at a polling application space out to 2^kAppLookShift
// windows (IBEX_APP_IDLE_US each).
constexpr unsigned kAppLookShift = 3;
} // namespace

EngineConfig EngineConfig::from_env() {
    EngineConfig c;
    c.max_inflight = static_cast<uint32_t>(config::get_int("IBEX_MAX_INFLIGHT", c.max_inflight, 4, 1 << 20));
    c.max_inflight_context =
        static_cast<uint32_t>(config::get_int("IBEX_MAX_INFLIGHT_CONTEXT", c.max_inflight_context, 16, 1 << 24));
    c.ack_req_every = static_cast<uint32_t>(config::get_int("IBEX_ACK_REQ_EVERY", c.ack_req_every, 1, 1 << 20));
    c.ack_delay_us = static_cast<uint32_t>(config::get_int("IBEX_ACK_DELAY_US", c.ack_delay_us, 0, 10000));
    c.ack_lazy_us = static_cast<uint32_t>(config::get_int("IBEX_ACK_LAZY_US", c.ack_lazy_us, 0, 10000));
    c.spin_us = static_cast<uint32_t>(config::get_int("IBEX_POLL_SPIN_US", c.spin_us, 0, 1000000));
    c.app_idle_us = static_cast<uint32_t>(config::get_int("IBEX_APP_IDLE_US", c.app_idle_us, 0, 1000000));
    c.progress_thread = config::get_bool("IBEX_PROGRESS_THREAD", c.progress_thread);
    // IBEX_RETRANSMIT is read by open_device, which can refuse a value it does not know.
    c.rto_low_us = static_cast<uint32_t>(config::get_int("IBEX_RTO_LOW_US", c.rto_low_us, 0, 1000000));
    c.bdp_bytes = static_cast<uint32_t>(config::get_int("IBEX_BDP_BYTES", c.bdp_bytes, 16 * 1024, 64 << 20));
    c.path = PathDefaults::from_env();
    c.max_inflight_from_env = *config::get_string("IBEX_MAX_INFLIGHT", "") != 0;
    c.max_inflight_context_from_env = *config::get_string("IBEX_MAX_INFLIGHT_CONTEXT", "") != 0;
    c.ack_req_every_from_env = *config::get_string("IBEX_ACK_REQ_EVERY", "") != 0;
    return c;
}

void EngineConfig::fit_to_mtu(uint32_t mtu_bytes) {
    constexpr uint32_t kWindowPacketBytes = 4096;
    if (!mtu_bytes || mtu_bytes >= kWindowPacketBytes) return;
    const uint32_t scale = kWindowPacketBytes / mtu_bytes;
    if (!max_inflight_from_env) max_inflight *= scale;
    if (!max_inflight_context_from_env) max_inflight_context *= scale;
    if (!ack_req_every_from_env) ack_req_every *= scale;
}

uint64_t SoftContext::now_ns() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

SoftContext::SoftContext(std::unique_ptr<Port> port, const EngineConfig &cfg)
    : port_(std::move(port)), port_fills_icrc_(port_->fills_icrc()), cfg_(cfg) {
    counters_.size = sizeof counters_;
    // QPNs start at a per-process offset so that a stale packet for a previous run's QP
    // is unlikely to name a live one.
    qpn_base_ = 0x100 + ((uint32_t(getpid()) * 0x3f1u) & 0xfff) * 0x100;
    ibex_fault_config_t f = IBEX_FAULT_CONFIG_INIT;
    f.loss = config::get_double("IBEX_FAULT_LOSS", 0, 0, 1);
    f.reorder = config::get_double("IBEX_FAULT_REORDER", 0, 0, 1);
    f.duplicate = config::get_double("IBEX_FAULT_DUPLICATE", 0, 0, 1);
    f.corrupt = config::get_double("IBEX_FAULT_CORRUPT", 0, 0, 1);
    f.seed = static_cast<uint64_t>(config::get_int("IBEX_FAULT_SEED", 0, 0, INT64_MAX));
    faults_.configure(f);
    tx_faulted_.reserve(4 * kTxBatch);
    tx_batch_ = std::clamp<size_t>(port_->tx_batch(), 1, kTxBatch);
}

SoftContext::~SoftContext() { stop(); }

void SoftContext::start() {
    if (!cfg_.progress_thread || thread_.joinable()) return;
    epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
    wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = wake_fd_;
    epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &ev);
    thread_ = std::thread([this] { progress_thread_main(); });
    pthread_setname_np(thread_.native_handle(), "ibex-progress"); // for top -H, perf, and the tests
    if (!cfg_.progress_cpus.empty()) {
        cpu_set_t set;
        CPU_ZERO(&set);
        for (unsigned c : cfg_.progress_cpus)
            if (c < CPU_SETSIZE) CPU_SET(c, &set);
        if (int e = pthread_setaffinity_np(thread_.native_handle(), sizeof set, &set))
            IBEX_LOG(warn, "progress thread: cannot pin to the chosen CPUs: %s", strerror(e));
    }
}

void SoftContext::stop() {
    if (thread_.joinable()) {
        stopping_ = true;
        uint64_t one = 1;
        [[maybe_unused]] ssize_t r = write(wake_fd_, &one, sizeof one);
        thread_.join();
    }
    if (epoll_fd_ >= 0) close(epoll_fd_);
    if (wake_fd_ >= 0) close(wake_fd_);
    epoll_fd_ = wake_fd_ = -1;
}

uint32_t SoftContext::add_qp(SoftQp *qp) {
    if (!qp->window.control) qp->window = make_send_window(cfg_.max_inflight, cfg_.max_inflight_context);
    if (cfg_.rate.enabled && !qp->rate) qp->rate = std::make_unique<QpRate>(cfg_.rate);
    for (size_t i = 0; i < qps_.size(); ++i) {
        if (!qps_[i]) {
            qps_[i] = qp;
            return qpn_base_ + static_cast<uint32_t>(i);
        }
    }
    if (qps_.size() >= kMaxQps) return 0;
    qps_.push_back(qp);
    return qpn_base_ + static_cast<uint32_t>(qps_.size() - 1);
}

void SoftContext::remove_qp(SoftQp *qp) {
    const uint32_t i = qp->qp_num - qpn_base_;
    if (i < qps_.size() && qps_[i] == qp) qps_[i] = nullptr;
    std::erase(active_, qp);
}

SoftQp *SoftContext::find_qp(uint32_t qpn) const {
    const uint32_t i = qpn - qpn_base_;
    return i < qps_.size() ? qps_[i] : nullptr;
}

void SoftContext::activate(SoftQp *qp) {
    if (qp->active) return;
    qp->active = true;
    active_.push_back(qp);
}

SoftContext::TxSlot &SoftContext::begin_tx() {
    if (tx_count_ == tx_batch_) flush_tx();
    TxSlot &s = tx_slots_[tx_count_];
    return s;
}

void SoftContext::commit_tx(TxSlot &slot, const SoftQp &qp, size_t hdr_len, int npayload, uint32_t payload_len) {
    TxPacket &p = slot.pkt;
    p.pieces[0] = {slot.hdr, hdr_len};
    const uint8_t pad = pad_for(payload_len);
    for (uint8_t i = 0; i < pad; ++i) slot.trailer[i] = 0;
    int n = 1 + npayload;
    const size_t transport_len = hdr_len + payload_len + pad;
    if (pad)
        p.pieces[n++] = {slot.trailer, size_t(pad) + kIcrcLen};
    else
        p.pieces[n++] = {slot.trailer, kIcrcLen};
    p.npieces = static_cast<uint16_t>(n);
    p.len = static_cast<uint32_t>(transport_len + kIcrcLen);
    p.dst = qp.dest;
    p.tos = static_cast<uint8_t>((qp.traffic_class & 0xfc) | kEcnEct0);
    p.pcp = qp.sl;
    // The port computes the ICRC while it copies the packet, where it copies anyway; not
    // while faults are injected, which change the packet after this and must leave its
    // ICRC wrong.
    p.icrc_pending = port_fills_icrc_ && !faults_.active();
    if (!p.icrc_pending) store_tx_icrc(p);
    tx_pkts_[tx_count_++] = p;
    ++counters_.tx_packets;
    counters_.tx_bytes += p.len;
}

void SoftContext::store_tx_icrc(TxPacket &p) const {
    const IcrcIpv4Fields f = tx_icrc_fields(port_->local(), p.dst);
    // Everything but the last 4 bytes, which are the ICRC's place in the engine's trailer.
    std::array<iovec, kMaxTxPieces> covered;
    std::copy(p.pieces, p.pieces + p.npieces, covered.begin());
    iovec &last = covered[p.npieces - 1];
    last.iov_len -= kIcrcLen;
    const uint32_t icrc = icrc_ipv4(f, std::span<const iovec>(covered.data(), p.npieces), p.len - kIcrcLen);
    store_icrc(static_cast<uint8_t *>(last.iov_base) + last.iov_len, icrc);
}

void SoftContext::send_cnp(const SoftQp &qp) {
    auto &slot = begin_tx();
    Bth b;
    b.opcode = kCnp;
    b.becn = true;
    b.dest_qp = qp.dest_qpn;
    encode_bth(slot.hdr, b);
    std::memset(slot.hdr + kBthLen, 0, kCnpPayloadLen);
    commit_tx(slot, qp, kBthLen + kCnpPayloadLen, 0, 0);
    // CNPs travel on their own class and are not ECN-capable, like an RNIC's.
    tx_pkts_[tx_count_ - 1].tos = static_cast<uint8_t>(cfg_.rate.params.cnp_dscp << 2);
    ++counters_.np_cnp_sent;
}

ibex_counters_t SoftContext::snapshot() const {
    ibex_counters_t c = counters_;
    c.tx_gso_trains = port_->tx_gso_trains();
    c.rx_gro_trains = port_->rx_gro_trains();
    return c;
}

void SoftContext::flush_tx() {
    if (!tx_count_) return;
    std::span<const TxPacket> batch(tx_pkts_.data(), tx_count_);
    if (faults_.active()) {
        // Faults switched on after these packets were committed: their ICRCs are made now,
        // before the injector changes anything.
        for (size_t i = 0; i < tx_count_; ++i)
            if (tx_pkts_[i].icrc_pending) {
                store_tx_icrc(tx_pkts_[i]);
                tx_pkts_[i].icrc_pending = false;
            }
        tx_faulted_.clear();
        faults_.apply(batch, tx_faulted_);
        counters_.faults_injected = faults_.injected();
        port_->send(tx_faulted_);
    } else {
        port_->send(batch);
    }
    tx_count_ = 0;
}

void SoftContext::receive(const RxPacket &pkt) {
    PacketView pv;
    if (parse_packet(pkt.data, pkt.len, &pv) != ParseError::kOk) {
        ++counters_.rx_dropped_malformed;
        return;
    }
    // The ICRC over the headers, then over the rest: while an in-order WRITE's payload is
    // copied to its place (one pass over the bytes instead of two), else on its own.
    const size_t head = static_cast<size_t>(pv.payload - pkt.data);
    uint32_t crc = rx_icrc_prefix_.begin(rx_icrc_fields(pkt), pkt.data, head, pv.transport_len);
    SoftQp *target = (pv.flags & kIsRequest) ? find_qp(pv.bth.dest_qp) : nullptr;
    uint8_t *place = target && target->dest == pkt.src ? responder_placement(*this, *target, pv) : nullptr;
    if (place) {
        crc = crc32_copy(crc, place, pv.payload, pv.payload_len);
        crc = crc32(crc, pv.payload + pv.payload_len, pv.transport_len - head - pv.payload_len); // the pad
    } else {
        crc = crc32(crc, pv.payload, pv.transport_len - head);
    }
    if (!icrc_matches(pkt, crc, pv.icrc, pv.transport_len, icrc_ip_id_)) {
        ++counters_.rx_icrc_errors;
        return;
    }
    ++counters_.rx_packets;
    counters_.rx_bytes += pkt.len;
    const bool ce = (pkt.tos & 3) == kEcnCe;
    if (ce) ++counters_.np_ecn_marked_roce_packets;
    if (pv.bth.opcode == kCnp) {
        ++counters_.rp_cnp_handled;
        // Reaction point: only a CNP from the QP's own peer changes its rate.
        SoftQp *qp = find_qp(pv.bth.dest_qp);
        if (qp && qp->rate && qp->dest == pkt.src) qp->rate->update(now_ns(), {cc::EventType::kCnpReceived});
        return;
    }
    SoftQp *qp = find_qp(pv.bth.dest_qp);
    if (!qp || qp->state == IBEX_QPS_RESET || qp->state == IBEX_QPS_INIT || !(qp->dest == pkt.src)) {
        ++counters_.rx_unknown_qp;
        return;
    }
    // Notification point: CE on a request means this QP's sender crosses a congested queue.
    if (ce && qp->rate && (pv.flags & kIsRequest) && qp->rate->update(now_ns(), {cc::EventType::kCeReceived}).send_cnp)
        send_cnp(*qp);
    if (pv.flags & kIsRequest)
        responder_receive(*this, *qp, pv, pkt.data, pkt.len, place != nullptr);
    else
        requester_receive(*this, *qp, pv, now_ns());
    activate(qp);
}

uint32_t SoftContext::service_qp(SoftQp &qp, uint64_t now, uint32_t max_packets) {
    requester_timers(*this, qp, now);
    qp.window.tick(now);
    rate_tick(qp.rate.get(), now);
    uint32_t budget = std::min(cfg_.tx_budget, max_packets);
    const uint32_t granted = budget;
    // New requests first: on loopback the kernel delivers a batch in order, so the peer
    // sees a request (what its application waits for) before the ACKs behind it. A pending
    // ACK then rides in the same batch, delayed or not (see EngineConfig::ack_delay_us).
    const uint64_t before = counters_.tx_packets;
    requester_transmit(*this, qp, now, budget);
    responder_transmit(*this, qp, budget, now, counters_.tx_packets != before);
    return granted - budget;
}

void SoftContext::transmit_now(SoftQp &qp) {
    activate(&qp);
    service_qp(qp, now_ns());
    flush_tx();
}

bool SoftContext::progress_once() {
    ++pass_;
    bool did = false;
    for (int round = 0; round < 4; ++round) {
        const int n = port_->recv(std::span<RxPacket>(rx_pkts_.data(), rx_pkts_.size()));
        if (n <= 0) break;
        for (int i = 0; i < n; ++i) receive(rx_pkts_[i]);
        did = true;
        if (n < static_cast<int>(rx_pkts_.size())) break;
    }
    const uint64_t now = now_ns();
    const uint64_t before = counters_.tx_packets;
    // Service every active QP, starting from a different one each pass, within a budget
    // per pass: a pass may send a few times what it can receive, not one burst per QP, so
    // that many busy QPs do not flood the peer faster than it drains its socket.
    deferring_acks_ = true;
    const size_t n = active_.size();
    const size_t start = n ? static_cast<size_t>(pass_ % n) : 0;
    uint32_t pass_budget = kPassBudget;
    for (size_t k = 0; k < n; ++k) pass_budget -= service_qp(*active_[(start + k) % n], now, pass_budget);
    std::erase_if(active_, [](SoftQp *qp) {
        const bool idle = qp->job_count == 0 && !qp->ack_pending && qp->tx_pos == qp->sq.tail() && qp->rto_deadline == 0;
        if (idle) qp->active = false;
        return idle;
    });
    deferring_acks_ = false;
    flush_tx();
    return did || counters_.tx_packets != before;
}

uint64_t SoftContext::next_deadline() const {
    uint64_t d = 0;
    const uint64_t now = cfg_.rate.enabled ? now_ns() : 0;
    for (const SoftQp *qp : active_) {
        uint64_t q = requester_deadline(*qp);
        // A paced QP with requests to send wakes the thread when its pacer allows.
        if (qp->rate && qp->tx_pos < qp->sq.tail() && qp->rate->pacer.next_ns() > now &&
            (!q || qp->rate->pacer.next_ns() < q))
            q = qp->rate->pacer.next_ns();
        // A WR waiting for its GPU staging copy: look again soon.
        if (staging::active() && staging::send_gated(*this, *qp)) {
            const uint64_t soon = now_ns() + kStagingPollNs;
            if (!q || soon < q) q = soon;
        }
        // A delayed ACK: when it is due.
        if (qp->ack_pending && !qp->job_count && (!q || qp->ack_due < q)) q = std::max<uint64_t>(qp->ack_due, 2);
        if (q && (!d || q < d)) d = q;
        if (qp->job_count) return 1; // work to send now
    }
    return d;
}

void SoftContext::note_app_progress() { last_app_progress_.store(now_ns(), std::memory_order_relaxed); }

void SoftContext::app_went_idle() {
    last_app_progress_.store(0, std::memory_order_relaxed);
    if (wake_fd_ >= 0) {
        uint64_t one = 1;
        [[maybe_unused]] ssize_t r = write(wake_fd_, &one, sizeof one);
    }
}

void SoftContext::progress_thread_main() {
    const uint64_t app_window = uint64_t(cfg_.app_idle_us) * 1000;
    const uint64_t spin = uint64_t(cfg_.spin_us) * 1000;
    uint64_t last_work = now_ns();
    unsigned app_looks = 0; // looks in a row that found the application still polling
    while (!stopping_.load(std::memory_order_relaxed)) {
        uint64_t now = now_ns();
        const uint64_t app = last_app_progress_.load(std::memory_order_relaxed);
        if (app && now - app < app_window) {
            // The application is polling: stay off the CPU it needs until it stops, or
            // until app_went_idle() (a CQ wait) signals the wake descriptor. Each look
            // that finds it still polling is a wake-up on a core it spins on, two context
            // switches: at one look per window, two ranks on two cores lost a tenth of an
            // 8-byte allreduce to them. So the looks space out while it keeps polling, up
            // to 2^kAppLookShift windows; an application that stops without waiting on a CQ
            // has its transfers driven again that much later at most.
            const uint64_t wait = app + app_window - now + app_window * ((1u << app_looks) - 1);
            app_looks = std::min(app_looks + 1, kAppLookShift);
            pollfd p{wake_fd_, POLLIN, 0};
            timespec ts{static_cast<time_t>(wait / 1000000000), static_cast<long>(wait % 1000000000)};
            if (ppoll(&p, 1, &ts, nullptr) > 0) {
                uint64_t v;
                [[maybe_unused]] ssize_t r = read(wake_fd_, &v, sizeof v);
                app_looks = 0;
            }
            continue;
        }
        app_looks = 0;
        bool did = false;
        uint64_t deadline = 0;
        {
            std::unique_lock lock(mu_, std::try_to_lock);
            if (!lock.owns_lock()) {
                sched_yield();
                continue;
            }
            did = progress_once();
            deadline = next_deadline();
        }
        now = now_ns();
        if (did || deadline == 1) {
            last_work = now;
            continue;
        }
        if (now - last_work < spin) {
            sched_yield();
            continue;
        }
        // Nanosecond wait: pacing wakes a QP every packet time, far below a millisecond.
        uint64_t timeout_ns = 100'000'000;
        if (deadline) timeout_ns = deadline <= now ? 0 : std::min<uint64_t>(deadline - now, timeout_ns);
        const timespec timeout{static_cast<time_t>(timeout_ns / 1000000000), static_cast<long>(timeout_ns % 1000000000)};
        {
            // The port arms what wakes it (rx interrupt, timer); it may find packets instead.
            std::unique_lock lock(mu_, std::try_to_lock);
            if (!lock.owns_lock() || !port_->arm_wait()) continue;
        }
        // The port's descriptor is in the epoll set only while this thread sleeps on it:
        // a descriptor in an epoll set makes every packet the kernel delivers to it run
        // the set's callback, on the sender's CPU, also while the application drives
        // progress and nobody waits (udp:lo, 2-byte WRITE ping-pong: 0.2 us a packet).
        const int port_fd = port_->wait_fd();
        epoll_event pev{};
        pev.events = EPOLLIN;
        pev.data.fd = port_fd;
        const bool watched = port_fd >= 0 && epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, port_fd, &pev) == 0;
        epoll_event evs[4];
        const int n = epoll_pwait2(epoll_fd_, evs, 4, &timeout, nullptr);
        if (watched) epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, port_fd, &pev);
        port_->wait_done();
        for (int i = 0; i < n; ++i) {
            if (evs[i].data.fd == wake_fd_) {
                uint64_t v;
                [[maybe_unused]] ssize_t r = read(wake_fd_, &v, sizeof v);
            }
        }
        if (n > 0) last_work = now_ns();
    }
}

SoftContext *to_soft(ibex_context *ctx) { return static_cast<SoftContext *>(ctx); }

} // namespace ibex::soft
