#include "transport/soft/dpdk/dpdk_port_internal.h"
#include "transport/soft/tx_copy.h"

#include <algorithm>
#include <cstring>

#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>

#include "runtime/base/config.h"
#include "runtime/base/log.h"
#include "transport/soft/codec/crc32_wide.h"
#include "transport/soft/codec/icrc.h"
#include "transport/soft/codec/roce.h"
#include "transport/soft/dpdk/prefault.h"

namespace ibex::soft::dpdk {
namespace {

constexpr uint32_t kZeroCopyMin = 512;  // shorter payload pieces are cheaper to copy
constexpr uint64_t kTxWaitNs = 2000000; // how long a full TX ring is retried before dropping
// A forwarding port does not wait for a full ring: one slow endpoint would stall the
// switch for every other one. It drops after a few bursts, as a switch's egress would.
constexpr uint64_t kForwardTxWaitNs = 0;

// The port's MAC: the PMD's, or the name's mac=. ibex frames with it and accepts frames to
// it; the PMD is told too where it filters (a NIC), which memif and af_* do not need.
Mac port_mac(const DeviceSpec &spec, uint16_t port_id) {
    rte_ether_addr a;
    rte_eth_macaddr_get(port_id, &a);
    Mac mac;
    std::memcpy(mac.b, a.addr_bytes, 6);
    if (spec.has_mac) {
        std::memcpy(mac.b, spec.mac, 6);
        std::memcpy(a.addr_bytes, spec.mac, 6);
        rte_eth_dev_default_mac_addr_set(port_id, &a);
    }
    return mac;
}

uint32_t sleep_us(const DeviceSpec &spec) {
    return spec.sleep_us ? spec.sleep_us : static_cast<uint32_t>(config::get_int("IBEX_DPDK_SLEEP_US", 200, 1, 1000000));
}

} // namespace

DpdkPort::DpdkPort(const DeviceSpec &spec, const Opened &o, NetAddr local, rte_mempool *pool, rte_mempool *hdr_pool,
                   rte_device *dma_device, uint8_t mtu, bool multi_seg, bool whole_frames)
    : spec_(spec), local_(local), pool_(pool), hdr_pool_(hdr_pool), dma_device_(dma_device),
      regions_(std::make_unique<TxRegions>(dma_device)),
      mtu_(mtu), multi_seg_(multi_seg), whole_frames_(whole_frames), l2_{spec.vlan, spec.pcp, spec.dscp},
      mac_(port_mac(spec, o.port_id)), io_(o, sleep_us(spec), whole_frames ? kForwardTxWaitNs : kTxWaitNs),
      session_(spec.target == Target::kMemif, o.port_id, o.memif_server, hdr_pool, mac_, name()),
      arp_(io_, hdr_pool, l2_, mac_, local.ip, stats_) {
    for (const auto &n : spec.neighbours) {
        Mac m;
        std::memcpy(m.b, n.mac, 6);
        arp_.add_static(n.ip, m);
    }
    if (o.kernel_arp) arp_.use_kernel_neighbours(spec.name);
    prefault_mempool(pool_);
    prefault_mempool(hdr_pool_);
}

DpdkPort::~DpdkPort() {
    release_held();
    for (uint16_t i = hdr_stash_pos_; i < hdr_stash_count_; ++i) rte_pktmbuf_free(hdr_stash_[i]);
    arp_.clear();
    session_.leave();
    io_.close();
    regions_.reset(); // its shinfos live on while mbufs hold them; none do after close
    rte_mempool_free(pool_);
    rte_mempool_free(hdr_pool_);
    IBEX_LOG(info,
             "dpdk port %s closed: tx zero-copy %llu, tx copied %llu (PMD cannot chain), tx copied with the ICRC %llu, "
             "tx dropped %llu, waited for ARP %llu, ARP requests %llu, replies %llu, rx not for us %llu",
             name().c_str(), (unsigned long long)stats_.tx_zero_copy, (unsigned long long)stats_.tx_copied,
             (unsigned long long)stats_.tx_icrc_filled,
             (unsigned long long)stats_.tx_dropped, (unsigned long long)stats_.tx_unresolved,
             (unsigned long long)stats_.arp_requests, (unsigned long long)stats_.arp_replies,
             (unsigned long long)stats_.rx_not_for_us);
}

DpdkPortStats DpdkPort::stats() const {
    DpdkPortStats s = stats_;
    s.peer_leaves = session_.peer_leaves();
    s.memif_reconnects = io_.opened().memif_reconnects;
    s.rx_interrupts = io_.rx_interrupts();
    s.multi_seg = multi_seg_;
    return s;
}

size_t DpdkPort::rx_buffer_bytes() const {
    const Opened &o = io_.opened();
    return size_t(o.rx_slots ? o.rx_slots : spec_.rxd) * (size_t(roce::mtu_bytes(mtu_)) + 64);
}

void DpdkPort::memory_deregistered(const void *addr, size_t len) {
    regions_->remove(addr, len);
    // A NIC may still hold descriptors that point into the region: reclaim them now.
    rte_eth_tx_done_cleanup(io_.port_id(), 0, 0);
}

void DpdkPort::peer_added(NetAddr peer) {
    if (!arp_.find(peer.ip)) arp_.ask(peer.ip, now_ns());
}

void DpdkPort::send(std::span<const TxPacket> pkts) {
    ensure_lcore();
    if (session_.quiet()) [[unlikely]] {
        stats_.tx_dropped += pkts.size(); // the peer has left: the wire drops, RC notices
        return;
    }
    uint16_t n = 0;
    for (const TxPacket &p : pkts) {
        if (n == kBurst) {
            transmit(n);
            n = 0;
        }
        const Mac *dst = arp_.find(p.dst.ip);
        if (whole_frames_) {
            if (rte_mbuf *m = forward(p, dst)) tx_[n++] = m;
            continue;
        }
        rte_mbuf *m = build(p, dst ? *dst : Mac{});
        if (!m) continue;
        if (dst) tx_[n++] = m;
        else arp_.hold(m, p.dst.ip, now_ns());
    }
    transmit(n);
}

// A whole frame, to the MAC this port learned for its destination: a frame for an
// endpoint not heard from yet is dropped (RC resends; its ARP request comes first anyway).
rte_mbuf *DpdkPort::forward(const TxPacket &p, const Mac *dst) {
    rte_mbuf *m = dst && p.len >= l2_header_len(L2Options{}) ? rte_pktmbuf_alloc(pool_) : nullptr;
    if (!m || rte_pktmbuf_tailroom(m) < p.len) {
        rte_pktmbuf_free(m);
        ++stats_.tx_dropped;
        return nullptr;
    }
    uint8_t *d = rte_pktmbuf_mtod(m, uint8_t *);
    const size_t len = gather_packet(d, p);
    m->data_len = static_cast<uint16_t>(len);
    m->pkt_len = static_cast<uint32_t>(len);
    rewrite_for_hop(d, len, mac_, *dst, p.tos);
    return m;
}

int DpdkPort::recv(std::span<RxPacket> out) {
    ensure_lcore();
    release_held();
    held_count_ = take(held_, out.data(), static_cast<uint16_t>(std::min<size_t>(out.size(), kBurst)));
    // Not once the peer is leaving: no burst until it has.
    if (arp_.waiting() && session_.open()) arp_.flush();
    return held_count_;
}

uint16_t DpdkPort::take_frames(rte_mbuf **frames, RxPacket *pkts, uint16_t n) {
    ensure_lcore();
    return take(frames, pkts, std::min(n, kBurst));
}

uint16_t DpdkPort::take(rte_mbuf **frames, RxPacket *pkts, uint16_t want) {
    if (session_.quiet()) [[unlikely]]
        return 0;
    session_.warm();
    uint16_t k = 0;
    while (k < want) {
        rte_mbuf *m = io_.next_rx(static_cast<uint16_t>(want - k));
        if (!m) break;
        if (handle_rx(m, &pkts[k], k)) {
            frames[k++] = m;
            continue;
        }
        rte_pktmbuf_free(m);
        if (!session_.open()) break; // the peer is leaving: no burst until it has
    }
    return k;
}

void DpdkPort::release_held() {
    if (held_count_) rte_pktmbuf_free_bulk(held_, held_count_);
    held_count_ = 0;
}

// A fresh header-pool mbuf. A zero-copy frame takes three (headers, payload, trailer):
// they are taken from the pool a burst at a time.
rte_mbuf *DpdkPort::hdr_mbuf() {
    if (hdr_stash_pos_ == hdr_stash_count_) {
        hdr_stash_pos_ = hdr_stash_count_ = 0;
        if (rte_pktmbuf_alloc_bulk(hdr_pool_, hdr_stash_, kBurst) != 0) return rte_pktmbuf_alloc(hdr_pool_);
        hdr_stash_count_ = kBurst;
    }
    return hdr_stash_[hdr_stash_pos_++];
}

// Appends a copy of [p, p + len) to the chain ending at *tail.
bool DpdkPort::append_copy(rte_mbuf *head, rte_mbuf **tail, const void *p, uint32_t len) {
    rte_mbuf *t = *tail;
    if (RTE_MBUF_HAS_EXTBUF(t) || rte_pktmbuf_tailroom(t) < len) {
        rte_mbuf *n = len <= kHeaderRoom ? hdr_mbuf() : rte_pktmbuf_alloc(pool_);
        if (!n || rte_pktmbuf_tailroom(n) < len) {
            rte_pktmbuf_free(n);
            return false;
        }
        t->next = n;
        ++head->nb_segs;
        *tail = t = n;
    }
    std::memcpy(rte_pktmbuf_mtod_offset(t, uint8_t *, t->data_len), p, len);
    t->data_len = static_cast<uint16_t>(t->data_len + len);
    head->pkt_len += len;
    return true;
}

// The frame for p, addressed to dst_mac (patched later when still unresolved).
rte_mbuf *DpdkPort::build(const TxPacket &p, const Mac &dst_mac) {
    if (p.icrc_pending) return build_with_icrc(p, dst_mac);
    const size_t hl = roce_header_len(l2_);
    bool eligible = false;
    for (int i = 1; i < p.npieces; ++i) eligible |= p.pieces[i].iov_len >= kZeroCopyMin;
    if (!eligible || !multi_seg_) {
        // One contiguous frame.
        rte_mbuf *m = rte_pktmbuf_alloc(pool_);
        if (!m || rte_pktmbuf_tailroom(m) < hl + p.len) {
            rte_pktmbuf_free(m);
            ++stats_.tx_dropped;
            return nullptr;
        }
        uint8_t *d = rte_pktmbuf_mtod(m, uint8_t *);
        write_roce_headers(d, l2_, mac_, dst_mac, local_, p.dst, p.tos, p.len, p.pcp);
        const size_t off = hl + gather_packet(d + hl, p);
        m->data_len = static_cast<uint16_t>(off);
        m->pkt_len = static_cast<uint32_t>(off);
        if (eligible) ++stats_.tx_copied;
        return m;
    }
    rte_mbuf *head = hdr_mbuf();
    if (!head) {
        ++stats_.tx_dropped;
        return nullptr;
    }
    write_roce_headers(rte_pktmbuf_mtod(head, uint8_t *), l2_, mac_, dst_mac, local_, p.dst, p.tos, p.len, p.pcp);
    head->data_len = static_cast<uint16_t>(hl);
    head->pkt_len = static_cast<uint32_t>(hl);
    rte_mbuf *tail = head;
    bool ok = true;
    bool zero_copy = false;
    for (int i = 0; i < p.npieces && ok; ++i) {
        const iovec &v = p.pieces[i];
        if (i > 0 && v.iov_len >= kZeroCopyMin) {
            rte_mbuf *m = hdr_mbuf();
            if (m && regions_->attach(m, v.iov_base, static_cast<uint32_t>(v.iov_len))) {
                tail->next = m;
                tail = m;
                ++head->nb_segs;
                head->pkt_len += static_cast<uint32_t>(v.iov_len);
                zero_copy = true;
                continue;
            }
            rte_pktmbuf_free(m);
        }
        ok = append_copy(head, &tail, v.iov_base, static_cast<uint32_t>(v.iov_len));
    }
    if (!ok) {
        rte_pktmbuf_free(head);
        ++stats_.tx_dropped;
        return nullptr;
    }
    if (zero_copy) ++stats_.tx_zero_copy;
    return head;
}

// One contiguous frame for a packet whose ICRC is still to be computed (fills_icrc()): the
// headers, then each piece copied in with the ICRC running over it, then the ICRC.
rte_mbuf *DpdkPort::build_with_icrc(const TxPacket &p, const Mac &dst_mac) {
    using roce::kBthLen;
    using roce::kIcrcLen;
    const size_t hl = roce_header_len(l2_);
    rte_mbuf *m = rte_pktmbuf_alloc(pool_);
    if (!m || rte_pktmbuf_tailroom(m) < hl + p.len || p.len < kBthLen + kIcrcLen) {
        rte_pktmbuf_free(m);
        ++stats_.tx_dropped;
        return nullptr;
    }
    uint8_t *d = rte_pktmbuf_mtod(m, uint8_t *);
    write_roce_headers(d, l2_, mac_, dst_mac, local_, p.dst, p.tos, p.len, p.pcp);
    copy_with_icrc(d + hl, p, tx_icrc_fields(local_, p.dst), tx_icrc_prefix_);
    m->data_len = static_cast<uint16_t>(hl + p.len);
    m->pkt_len = static_cast<uint32_t>(hl + p.len);
    ++stats_.tx_icrc_filled;
    return m;
}

// Classifies one received frame; true if it is a RoCE packet for us (in whole-frame mode:
// for any address), now in *out.
bool DpdkPort::handle_rx(rte_mbuf *m, RxPacket *out, uint16_t slot) {
    const uint8_t *data = rte_pktmbuf_mtod(m, const uint8_t *);
    size_t len = m->data_len;
    if (m->nb_segs > 1) {
        // A frame the PMD spread over segments: linearise it (rare with our data room). A
        // whole frame is handed on as its mbuf holds it, so it must be one segment.
        if (m->pkt_len > sizeof linear_[0] || whole_frames_) return false;
        data = static_cast<const uint8_t *>(rte_pktmbuf_read(m, 0, m->pkt_len, linear_[slot]));
        len = m->pkt_len;
    }
    ParsedFrame f = parse_frame(data, len, local_.port);
    // Promiscuous PMDs (af_packet, af_xdp on a shared segment) see others' frames too. A
    // forwarding port's link is a memif, point to point: all it carries is for the switch,
    // whatever MAC the endpoint chose.
    if (!(f.dst_mac == mac_) && !(f.dst_mac.b[0] & 1) && !whole_frames_) {
        ++stats_.rx_not_for_us;
        return false;
    }
    if (f.kind == FrameKind::kRoce) {
        if (f.pkt.dst.ip != local_.ip && !whole_frames_) {
            ++stats_.rx_not_for_us;
            return false;
        }
        arp_.learn_source(f.pkt.src.ip, f.src_mac);
        *out = f.pkt;
        if (whole_frames_) {
            out->data = data;
            out->len = static_cast<uint32_t>(len);
        }
        return true;
    }
    if (f.kind == FrameKind::kLeave) {
        if (f.leave_op == LeaveOp::leaving) session_.peer_leaving();
        return false;
    }
    if (f.kind == FrameKind::kArp) {
        arp_.on_arp(f);
        return false;
    }
    ++stats_.rx_not_for_us;
    return false;
}

} // namespace ibex::soft::dpdk
