#include "tools/ibex_switch/switch.h"

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <poll.h>
#include <sched.h>
#include <sys/prctl.h>

#include "tools/ibex_switch/switch_ports.h"
#include "transport/soft/codec/icrc.h"

namespace ibex::sw {
namespace {
constexpr uint32_t kSlotBytes = 4224; // a 4096-byte MTU packet with every header and the ICRC
constexpr int kRxBatch = 32;
constexpr uint8_t kEcnMask = 0x3;
constexpr uint8_t kEcnCe = 0x3;

uint32_t icrc_for(const uint8_t *data, uint32_t transport_len, const soft::NetAddr &src, const soft::NetAddr &dst) {
    roce::IcrcIpv4Fields f;
    f.src_ip = src.ip;
    f.src_port = src.port;
    f.dst_ip = dst.ip;
    f.dst_port = dst.port;
    const iovec whole{const_cast<uint8_t *>(data), transport_len};
    return roce::icrc_ipv4(f, std::span<const iovec>(&whole, 1), transport_len);
}
} // namespace

Switch::Switch(const SwitchConfig &cfg) : cfg_(cfg), red_(cfg.red, cfg.seed) {
    // Enough slots for a buffer full of the smallest packets (a bare ACK); the byte limit
    // decides drops.
    max_slots_ = cfg.buffer_bytes / 32 + 16;
}

uint64_t Switch::now_ns() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

void Switch::add_port(std::unique_ptr<soft::Port> io, const soft::NetAddr &endpoint) {
    Port p;
    p.io = std::move(io);
    p.endpoint = endpoint;
    p.shaper.set_rate(cfg_.link_mbps);
    p.shaper.set_burst(cfg_.burst_ns);
    ports_.push_back(std::move(p));
    for (Port &q : ports_) q.from.resize(ports_.size(), 0);
}

int Switch::ingress_of(const soft::NetAddr &src) const {
    for (size_t i = 0; i < ports_.size(); ++i)
        if (ports_[i].endpoint == src) return static_cast<int>(i);
    return -1;
}

uint64_t Switch::shared_size() const {
    const uint64_t reserved = cfg_.reserve_bytes * ports_.size();
    return cfg_.buffer_bytes > reserved ? cfg_.buffer_bytes - reserved : 0;
}

namespace {
uint64_t beyond(uint64_t q, uint64_t reserve) { return q > reserve ? q - reserve : 0; }
} // namespace

bool Switch::admit(const Port &out, uint32_t len) const {
    const uint64_t q = out.c.queue_bytes;
    const uint64_t more = beyond(q + len, cfg_.reserve_bytes) - beyond(q, cfg_.reserve_bytes);
    return shared_used_ + more <= shared_size();
}

void Switch::enqueue(size_t egress, size_t ingress, const soft::RxPacket &f) {
    Port &out = ports_[egress];
    if (free_slots_.empty() && slots_.size() < max_slots_) {
        slots_.push_back(std::make_unique<uint8_t[]>(kSlotBytes));
        free_slots_.push_back(static_cast<uint32_t>(slots_.size() - 1));
    }
    if (f.len < 4 || f.len > kSlotBytes || !admit(out, f.len) || free_slots_.empty()) {
        ++out.c.dropped;
        return;
    }
    // The ICRC the sender computed covers its own and the switch port's address; a
    // packet that fails it is dropped here, as the receiver would, before the switch
    // writes a fresh ICRC for the addresses it sends with. Whole frames (memif) keep their
    // addresses, so their ICRC stays valid and is left to the receiver.
    const uint32_t tlen = f.len - 4;
    const bool rewrite = !out.io->whole_frames();
    if (rewrite && icrc_for(f.data, tlen, ports_[ingress].endpoint, out.io->local()) != roce::load_icrc(f.data + tlen)) {
        ++out.c.icrc_errors;
        return;
    }
    const uint8_t tos = f.tos;
    const uint32_t slot = free_slots_.back();
    free_slots_.pop_back();
    uint8_t *dst = slots_[slot].get();
    std::memcpy(dst, f.data, rewrite ? tlen : f.len);
    if (rewrite) roce::store_icrc(dst + tlen, icrc_for(dst, tlen, ports_[ingress].io->local(), out.endpoint));
    out.queue.push_back({slot, f.len, static_cast<uint16_t>(ingress), tos});
    shared_used_ += beyond(out.c.queue_bytes + f.len, cfg_.reserve_bytes) - beyond(out.c.queue_bytes, cfg_.reserve_bytes);
    out.c.queue_bytes += f.len;
    out.c.max_queue_bytes = std::max(out.c.max_queue_bytes, out.c.queue_bytes);
    used_ += f.len;
    if (cfg_.pause && !out.paused && out.c.queue_bytes > cfg_.xoff_bytes) {
        out.paused = true;
        ++out.c.pauses;
    }
}

bool Switch::transmit(size_t egress, uint64_t now) {
    Port &out = ports_[egress];
    bool moved = false;
    while (!out.queue.empty() && out.shaper.ready(now)) {
        Packet p = out.queue.front();
        out.queue.pop_front();
        shared_used_ -= beyond(out.c.queue_bytes, cfg_.reserve_bytes) - beyond(out.c.queue_bytes - p.len, cfg_.reserve_bytes);
        out.c.queue_bytes -= p.len;
        // Marked on dequeue, by the queue it leaves behind: the mark reaches the receiver
        // without waiting through the queue it reports (faster feedback than on enqueue).
        if (cfg_.ecn && (p.tos & kEcnMask) == 0 && out.c.queue_bytes > cfg_.red.kmin_bytes) ++out.c.not_ect;
        if (cfg_.ecn && (p.tos & kEcnMask) != 0 && red_.mark(out.c.queue_bytes)) {
            p.tos = static_cast<uint8_t>((p.tos & ~kEcnMask) | kEcnCe);
            ++out.c.marked;
        }
        const uint8_t *data = slots_[p.slot].get();
        // Sent from the ingress port's address: the receiver knows its peer by that.
        if (ports_[p.ingress].io->send_one(data, p.len, out.endpoint, p.tos)) {
            ++out.c.tx_packets;
            out.c.tx_bytes += p.len;
            out.from[p.ingress] += p.len;
        } else {
            ++out.c.tx_errors;
        }
        out.shaper.sent(now, p.len);
        used_ -= p.len;
        free_slots_.push_back(p.slot);
        moved = true;
    }
    if (out.paused && out.c.queue_bytes < cfg_.xon_bytes) out.paused = false;
    return moved;
}

void Switch::sample(uint64_t now) {
    if (!start_ns_) {
        start_ns_ = now;
        next_sample_ = now;
    }
    if (now < next_sample_) return;
    for (size_t i = 0; i < ports_.size(); ++i) {
        const Port &p = ports_[i];
        samples_.push_back({now - start_ns_, static_cast<uint32_t>(i), p.c.queue_bytes, p.c.tx_bytes, p.c.marked,
                            p.c.dropped, p.from});
    }
    next_sample_ += cfg_.sample_ns;
    if (next_sample_ <= now) next_sample_ = now + cfg_.sample_ns;
}

bool Switch::poll(uint64_t now) {
    constexpr uint64_t kStall = 2'000'000;
    if (last_poll_ && now - last_poll_ > kStall) stalled_ns_ += now - last_poll_ - kStall;
    last_poll_ = now;
    bool moved = false;
    soft::RxPacket frames[kRxBatch];
    for (size_t e = 0; e < ports_.size(); ++e) {
        Port &p = ports_[e];
        for (int round = 0; round < 4 && !p.paused; ++round) {
            const int n = p.io->recv(frames);
            for (int k = 0; k < n; ++k) {
                const int in = ingress_of(frames[k].src);
                if (in < 0) {
                    ++p.c.unknown_src;
                    continue;
                }
                ++ports_[in].c.rx_packets;
                ports_[in].c.rx_bytes += frames[k].len;
                enqueue(e, static_cast<size_t>(in), frames[k]);
                moved = true;
            }
            if (n < kRxBatch) break;
        }
    }
    for (size_t e = 0; e < ports_.size(); ++e) moved |= transmit(e, now);
    sample(now);
    return moved;
}

uint64_t Switch::next_departure() const {
    uint64_t t = 0;
    for (const Port &p : ports_)
        if (!p.queue.empty() && (!t || p.shaper.next_ns() < t)) t = p.shaper.next_ns();
    return t;
}

void Switch::run(const std::atomic<bool> &stop, uint64_t duration_ns) {
    // Departures are microseconds apart: ask the kernel for a tight timer.
    prctl(PR_SET_TIMERSLACK, 1000UL);
    const uint64_t start = now_ns();
    std::vector<pollfd> fds;
    bool blind_port = false; // a port that cannot wake the switch
    for (const Port &p : ports_) blind_port = blind_port || p.io->wait_fd() < 0;
    uint64_t last_busy = start;
    while (!stop.load(std::memory_order_relaxed)) {
        const uint64_t now = now_ns();
        if (duration_ns && now - start >= duration_ns) break;
        if (poll(now)) {
            last_busy = now;
            continue;
        }
        if (blind_port && now - last_busy < cfg_.spin_ns) {
            sched_yield();
            continue;
        }
        uint64_t wake = now + (blind_port ? cfg_.idle_poll_ns : 1'000'000);
        if (const uint64_t d = next_departure()) wake = std::min(wake, d);
        wake = std::min(wake, next_sample_);
        if (wake <= now) continue;
        fds.clear();
        for (const Port &p : ports_)
            if (!p.paused && p.io->wait_fd() >= 0) fds.push_back({p.io->wait_fd(), POLLIN, 0});
        const uint64_t w = wake - now;
        const timespec ts{static_cast<time_t>(w / 1000000000), static_cast<long>(w % 1000000000)};
        ppoll(fds.data(), fds.size(), &ts, nullptr);
    }
}

bool Switch::write_csv(const std::string &path, std::string &err) const {
    FILE *f = std::fopen(path.c_str(), "w");
    if (!f) {
        err = "cannot write " + path + ": " + std::strerror(errno);
        return false;
    }
    std::fprintf(f, "t_us,port,queue_bytes,tx_bytes,marked,dropped");
    for (size_t i = 0; i < ports_.size(); ++i) std::fprintf(f, ",from%zu_bytes", i);
    std::fprintf(f, "\n");
    for (const Sample &s : samples_) {
        std::fprintf(f, "%.1f,%u,%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64, s.t_ns / 1e3, s.port, s.queue_bytes,
                     s.tx_bytes, s.marked, s.dropped);
        for (uint64_t b : s.from) std::fprintf(f, ",%" PRIu64, b);
        std::fprintf(f, "\n");
    }
    const bool ok = std::fclose(f) == 0;
    if (!ok) err = "cannot write " + path;
    return ok;
}

std::string Switch::summary() const {
    std::string out = "port  endpoint               rx_pkts    tx_pkts      tx_MB   marked  not_ect  dropped  max_queue_KB  pauses\n";
    char line[256];
    for (size_t i = 0; i < ports_.size(); ++i) {
        const PortCounters &c = ports_[i].c;
        std::snprintf(line, sizeof line, "%4zu  %-21s %9" PRIu64 " %10" PRIu64 " %10.2f %8" PRIu64 " %8" PRIu64 " %8" PRIu64 " %13.1f %7" PRIu64 "\n", i,
                      format_addr(ports_[i].endpoint).c_str(), c.rx_packets, c.tx_packets, c.tx_bytes / 1e6, c.marked,
                      c.not_ect, c.dropped, c.max_queue_bytes / 1024.0, c.pauses);
        out += line;
    }
    return out;
}

} // namespace ibex::sw
