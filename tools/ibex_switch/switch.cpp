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

uint32_t icrc_for(const uint8_t *data, uint32_t transport_len, const soft::NetAddr &src, const soft::NetAddr &dst,
                  uint16_t ip_id = 0) {
    roce::IcrcIpv4Fields f;
    f.ip_id = ip_id;
    f.src_ip = src.ip;
    f.src_port = src.port;
    f.dst_ip = dst.ip;
    f.dst_port = dst.port;
    const iovec whole{const_cast<uint8_t *>(data), transport_len};
    return roce::icrc_ipv4(f, std::span<const iovec>(&whole, 1), transport_len);
}
} // namespace

Switch::Switch(const SwitchConfig &cfg) : cfg_(cfg), cp_(cfg), series_(cfg.sample_ns) {
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
    ports_.push_back(std::move(p));
    cp_.add_port();
}

int Switch::ingress_of(const soft::NetAddr &src) const {
    for (size_t i = 0; i < ports_.size(); ++i)
        if (ports_[i].endpoint == src) return static_cast<int>(i);
    return -1;
}

PortCounters Switch::counters(size_t port) const {
    const Port &p = ports_[port];
    PortCounters c;
    static_cast<cc::EgressCounters &>(c) = cp_.counters(port);
    c.rx_packets = p.rx_packets;
    c.rx_bytes = p.rx_bytes;
    c.unknown_src = p.unknown_src;
    c.icrc_errors = p.icrc_errors;
    return c;
}

void Switch::enqueue(uint64_t now, size_t egress, size_t ingress, const soft::RxPacket &f) {
    Port &out = ports_[egress];
    if (free_slots_.empty() && slots_.size() < max_slots_) {
        slots_.push_back({std::make_unique<uint8_t[]>(kSlotBytes), 0});
        free_slots_.push_back(static_cast<uint32_t>(slots_.size() - 1));
    }
    if (f.len < 4 || f.len > kSlotBytes || !cp_.admits(egress, f.len) || free_slots_.empty()) {
        cp_.count_drop(egress);
        return;
    }
    // The ICRC the sender computed covers its own and the switch port's address (and the IP
    // ID of its segment of a GSO train, which the kernel cut); a packet that fails it is
    // dropped here, as the receiver would, before the switch
    // writes a fresh ICRC for the addresses it sends with. Whole frames (memif) keep their
    // addresses, so their ICRC stays valid and is left to the receiver.
    const uint32_t tlen = f.len - 4;
    const bool rewrite = !out.io->whole_frames();
    if (rewrite && !soft::icrc_matches(f, icrc_for(f.data, tlen, ports_[ingress].endpoint, out.io->local(), f.ip_id),
                                       roce::load_icrc(f.data + tlen), tlen, icrc_ip_id_)) {
        ++out.icrc_errors;
        return;
    }
    const uint32_t slot = free_slots_.back();
    free_slots_.pop_back();
    Slot &s = slots_[slot];
    uint8_t *dst = s.bytes.get();
    std::memcpy(dst, f.data, rewrite ? tlen : f.len);
    if (rewrite) roce::store_icrc(dst + tlen, icrc_for(dst, tlen, ports_[ingress].io->local(), out.endpoint));
    s.tos = f.tos;
    const bool ect = (f.tos & kEcnMask) != 0;
    cp_.enqueue(now, egress, {slot, f.len, static_cast<uint16_t>(ingress), ect});
}

bool Switch::transmit(size_t egress, uint64_t now) {
    const Port &out = ports_[egress];
    bool moved = false;
    while (const std::optional<cc::Departure> d = cp_.dequeue(now, egress)) {
        const cc::PacketMeta &p = d->packet;
        Slot &s = slots_[p.handle];
        if (d->ce) s.tos = static_cast<uint8_t>((s.tos & ~kEcnMask) | kEcnCe);
        const uint8_t *data = s.bytes.get();
        // Sent from the ingress port's address: the receiver knows its peer by that.
        if (!ports_[p.ingress].io->send_one(data, p.bytes, out.endpoint, s.tos)) cp_.not_sent(egress, *d);
        free_slots_.push_back(p.handle);
        moved = true;
    }
    return moved;
}

bool Switch::poll(uint64_t now) {
    constexpr uint64_t kStall = 2'000'000;
    if (last_poll_ && now - last_poll_ > kStall) stalled_ns_ += now - last_poll_ - kStall;
    last_poll_ = now;
    bool moved = false;
    soft::RxPacket frames[kRxBatch];
    for (size_t e = 0; e < ports_.size(); ++e) {
        Port &p = ports_[e];
        for (int round = 0; round < 4 && !cp_.paused(e); ++round) {
            const int n = p.io->recv(frames);
            for (int k = 0; k < n; ++k) {
                const int in = ingress_of(frames[k].src);
                if (in < 0) {
                    ++p.unknown_src;
                    continue;
                }
                ++ports_[in].rx_packets;
                ports_[in].rx_bytes += frames[k].len;
                enqueue(now, e, static_cast<size_t>(in), frames[k]);
                moved = true;
            }
            if (n < kRxBatch) break;
        }
    }
    for (size_t e = 0; e < ports_.size(); ++e) moved |= transmit(e, now);
    series_.sample(now, cp_);
    return moved;
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
        wake = std::min(wake, series_.next_ns());
        if (wake <= now) continue;
        fds.clear();
        for (size_t e = 0; e < ports_.size(); ++e)
            if (!cp_.paused(e) && ports_[e].io->wait_fd() >= 0) fds.push_back({ports_[e].io->wait_fd(), POLLIN, 0});
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
    for (const Sample &s : samples()) {
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
        const PortCounters c = counters(i);
        std::snprintf(line, sizeof line, "%4zu  %-21s %9" PRIu64 " %10" PRIu64 " %10.2f %8" PRIu64 " %8" PRIu64 " %8" PRIu64 " %13.1f %7" PRIu64 "\n", i,
                      format_addr(ports_[i].endpoint).c_str(), c.rx_packets, c.tx_packets, c.tx_bytes / 1e6, c.marked,
                      c.not_ect, c.dropped, c.max_queue_bytes / 1024.0, c.pauses);
        out += line;
    }
    return out;
}

} // namespace ibex::sw
