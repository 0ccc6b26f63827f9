#include "transport/soft/dpdk/arp_resolver.h"

#include <algorithm>
#include <arpa/inet.h>
#include <cstdio>
#include <cstring>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <rte_arp.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>

namespace ibex::soft::dpdk {
namespace {

constexpr uint64_t kArpInterval = 1000000;     // ns between ARP requests for one address
constexpr uint64_t kUnresolvedTtl = 200000000; // ns; older waiting frames are dropped (RC resends)

} // namespace

ArpResolver::ArpResolver(EthdevIo &io, rte_mempool *pool, const L2Options &l2, const Mac &mac, uint32_t ip,
                         DpdkPortStats &stats)
    : io_(io), pool_(pool), l2_(l2), mac_(mac), ip_(ip), stats_(stats) {
    unresolved_.reserve(kUnresolvedMax);
}

void ArpResolver::clear() {
    for (const Unresolved &u : unresolved_) rte_pktmbuf_free(u.m);
    unresolved_.clear();
}

void ArpResolver::on_arp(const ParsedFrame &f) {
    if (f.arp_sender_ip && !f.arp_sender_mac.is_zero()) neigh_.learn(f.arp_sender_ip, f.arp_sender_mac);
    if (f.arp_op != RTE_ARP_OP_REQUEST) return;
    const bool ours = proxy_.empty() ? f.arp_target_ip == ip_
                                     : std::find(proxy_.begin(), proxy_.end(), f.arp_target_ip) != proxy_.end();
    if (!ours) return;
    ++stats_.arp_replies;
    send_arp(RTE_ARP_OP_REPLY, f.arp_sender_mac, f.arp_target_ip, f.arp_sender_ip);
}

void ArpResolver::ask(uint32_t ip, uint64_t now) {
    if (!neigh_.should_ask(ip, now, kArpInterval)) return;
    if (!kernel_if_.empty()) {
        Mac mac;
        if (kernel_lookup(ip, &mac)) {
            neigh_.learn(ip, mac);
            return;
        }
        ++stats_.arp_requests;
        kernel_prompt(ip);
        return;
    }
    ++stats_.arp_requests;
    send_arp(RTE_ARP_OP_REQUEST, kBroadcast, ip_, ip);
}

bool ArpResolver::kernel_lookup(uint32_t ip, Mac *out) const {
    // Lines: "IP address  HW type  Flags  HW address  Mask  Device"; flag 0x2 is a
    // complete entry.
    FILE *f = std::fopen("/proc/net/arp", "re");
    if (!f) return false;
    char line[256];
    bool found = false;
    if (std::fgets(line, sizeof line, f)) { // the header
        while (!found && std::fgets(line, sizeof line, f)) {
            char ipstr[64], hw[64], dev[64];
            unsigned type = 0, flags = 0;
            if (std::sscanf(line, "%63s 0x%x 0x%x %63s %*s %63s", ipstr, &type, &flags, hw, dev) != 5) continue;
            in_addr a{};
            if (!(flags & 0x2) || kernel_if_ != dev || inet_pton(AF_INET, ipstr, &a) != 1 || ntohl(a.s_addr) != ip)
                continue;
            unsigned b[6];
            if (std::sscanf(hw, "%x:%x:%x:%x:%x:%x", &b[0], &b[1], &b[2], &b[3], &b[4], &b[5]) != 6) continue;
            for (int i = 0; i < 6; ++i) out->b[i] = static_cast<uint8_t>(b[i]);
            found = !out->is_zero();
        }
    }
    std::fclose(f);
    return found;
}

void ArpResolver::kernel_prompt(uint32_t ip) const {
    const int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return;
    // Out of the port's interface, whatever the routes say (needs CAP_NET_RAW; without it
    // the route decides, which for the interface's own subnet is the same).
    setsockopt(fd, SOL_SOCKET, SO_BINDTODEVICE, kernel_if_.c_str(), static_cast<socklen_t>(kernel_if_.size()));
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(9); // discard
    to.sin_addr.s_addr = htonl(ip);
    [[maybe_unused]] ssize_t r = sendto(fd, "", 0, MSG_DONTWAIT, reinterpret_cast<sockaddr *>(&to), sizeof to);
    close(fd);
}

void ArpResolver::send_arp(uint16_t op, const Mac &dst_mac, uint32_t src_ip, uint32_t dst_ip) {
    rte_mbuf *m = rte_pktmbuf_alloc(pool_);
    if (!m) return;
    uint8_t *d = rte_pktmbuf_mtod(m, uint8_t *);
    const size_t len = write_arp(d, l2_, op, mac_, src_ip, dst_mac, dst_ip);
    m->data_len = static_cast<uint16_t>(len);
    m->pkt_len = static_cast<uint32_t>(len);
    if (io_.tx_burst(&m, 1) != 1) rte_pktmbuf_free(m);
}

void ArpResolver::hold(rte_mbuf *m, uint32_t ip, uint64_t now) {
    ask(ip, now);
    if (unresolved_.size() < kUnresolvedMax) {
        ++stats_.tx_unresolved;
        unresolved_.push_back({m, ip, now});
    } else {
        rte_pktmbuf_free(m);
        ++stats_.tx_dropped;
    }
}

void ArpResolver::flush() {
    const uint64_t now = now_ns();
    rte_mbuf *out[kBurst];
    uint16_t n = 0;
    size_t keep = 0;
    for (size_t i = 0; i < unresolved_.size(); ++i) {
        Unresolved u = unresolved_[i];
        if (const Mac *mac = neigh_.find(u.ip)) {
            std::memcpy(rte_pktmbuf_mtod(u.m, uint8_t *), mac->b, 6);
            if (n == kBurst) {
                stats_.tx_dropped += io_.transmit(out, n);
                n = 0;
            }
            out[n++] = u.m;
        } else if (now - u.since > kUnresolvedTtl) {
            rte_pktmbuf_free(u.m);
            ++stats_.tx_dropped;
        } else {
            ask(u.ip, now);
            unresolved_[keep++] = u;
        }
    }
    unresolved_.resize(keep);
    stats_.tx_dropped += io_.transmit(out, n);
}

} // namespace ibex::soft::dpdk
