#include "transport/soft/dpdk/arp_resolver.h"

#include <algorithm>
#include <cstring>

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
    ++stats_.arp_requests;
    send_arp(RTE_ARP_OP_REQUEST, kBroadcast, ip_, ip);
}

void ArpResolver::send_arp(uint16_t op, const Mac &dst_mac, uint32_t src_ip, uint32_t dst_ip) {
    rte_mbuf *m = rte_pktmbuf_alloc(pool_);
    if (!m) return;
    uint8_t *d = rte_pktmbuf_mtod(m, uint8_t *);
    const size_t len = write_arp(d, l2_, op, mac_, src_ip, dst_mac, dst_ip);
    m->data_len = static_cast<uint16_t>(len);
    m->pkt_len = static_cast<uint32_t>(len);
    if (rte_eth_tx_burst(io_.port_id(), 0, &m, 1) != 1) rte_pktmbuf_free(m);
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
