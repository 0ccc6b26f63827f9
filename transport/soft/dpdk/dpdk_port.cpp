#include "transport/soft/dpdk/dpdk_port.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fcntl.h>
#include <sched.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <thread>

#include <rte_arp.h>
#include <rte_bus.h>
#include <rte_dev.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>

#include "runtime/base/config.h"
#include "runtime/base/log.h"
#include "runtime/base/status.h"
#include "transport/soft/codec/roce.h"
#include "transport/soft/dpdk/device_spec.h"
#include "transport/soft/dpdk/eal.h"
#include "transport/soft/dpdk/ethdev_attach.h"
#include "transport/soft/dpdk/frame.h"
#include "transport/soft/dpdk/leave_gate.h"
#include "transport/soft/dpdk/neighbour_table.h"
#include "transport/soft/dpdk/prefault.h"
#include "transport/soft/dpdk/tx_regions.h"

namespace ibex::soft {
namespace dpdk {
namespace {

constexpr uint16_t kBurst = 64;
constexpr int kDefaultMtu = 4200;           // IP MTU that carries the 4096-byte RoCE MTU
constexpr uint32_t kHeaderRoom = 256;       // header mbufs: Ethernet .. BTH/RETH and small pieces
constexpr uint32_t kZeroCopyMin = 512;      // shorter payload pieces are cheaper to copy
constexpr uint64_t kArpInterval = 1000000;  // ns between ARP requests for one address
constexpr uint64_t kTxWaitNs = 2000000;     // how long a full TX ring is retried before dropping
constexpr uint64_t kLeaveWaitNs = LeaveGate::kLeaverWaitNs; // how long a closing memif port waits for its peer
constexpr uint64_t kRegionCheckNs = 1000000; // a closed gate reads /proc/self/maps at most this often
// Frames waiting for their neighbour's ARP reply (as the kernel's unresolved queue): the
// first packets of a connection are not lost to resolution.
constexpr size_t kUnresolvedMax = 1024;
constexpr uint64_t kUnresolvedTtl = 200000000; // ns; older frames are dropped (RC resends)

uint64_t now_ns() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}



// Mempools keep a per-lcore cache, a LIFO of recently freed mbufs; a thread that is no EAL
// lcore (the engine's progress thread, other application threads) has none and takes
// every mbuf from the shared ring, which is FIFO: the mbuf memif receives into next is the
// one freed longest ago, out of cache (measured: the receive copy took 4x as long). So
// each thread that drives the port becomes an lcore on first use, and gives the id back
// when it ends. Without a free lcore id it runs on uncached, as before.
struct LcoreRegistration {
    bool registered = false;
    LcoreRegistration() {
        if (rte_lcore_id() != LCORE_ID_ANY) return; // EAL's own thread, or registered already
        registered = rte_thread_register() == 0 && rte_lcore_id() != LCORE_ID_ANY;
    }
    ~LcoreRegistration() {
        if (registered) rte_thread_unregister();
    }
    LcoreRegistration(const LcoreRegistration &) = delete;
    LcoreRegistration &operator=(const LcoreRegistration &) = delete;
};

void register_this_thread() { thread_local LcoreRegistration reg; }
// Once registered, rte_lcore_id() answers and the thread_local above is not looked up again.
inline void ensure_lcore() {
    if (rte_lcore_id() == LCORE_ID_ANY) [[unlikely]]
        register_this_thread();
}

std::string ip_text(uint32_t ip) {
    char b[20];
    std::snprintf(b, sizeof b, "%u.%u.%u.%u", ip >> 24, (ip >> 16) & 255, (ip >> 8) & 255, ip & 255);
    return b;
}

bool link_is_up(uint16_t port_id) {
    rte_eth_link link{};
    return rte_eth_link_get_nowait(port_id, &link) == 0 && link.link_status;
}

void restart_device(void *p) {
    const auto port_id = static_cast<uint16_t>(reinterpret_cast<uintptr_t>(p));
    rte_eth_dev_stop(port_id);
    rte_eth_dev_start(port_id);
}

// Waits (bounded) for the link of a port that is not a memif server. A memif client may
// have connected between the server's probe, which creates the socket, and its start:
// 22.11's server then refuses the client ("ID not found") and the client never tries again.
// So a memif client whose link stays down reconnects, at growing intervals. True once the
// link is up.
constexpr int kLinkWaitMs = 2000;     // any port that is not a memif server
constexpr int kMemifLinkWaitMs = 5000; // a memif client: its server may still be starting
bool wait_for_link(uint16_t port_id, bool memif_client) {
    const int total = memif_client ? kMemifLinkWaitMs : kLinkWaitMs;
    int waited = 0;
    for (int interval = 25; waited < total; interval *= 2) {
        for (int i = 0; i < interval && waited < total; ++i, ++waited) {
            if (link_is_up(port_id)) return true;
            usleep(1000);
        }
        if (!memif_client || waited >= total || link_is_up(port_id)) continue;
        IBEX_LOG(debug, "dpdk port %u: memif link still down after %d ms: reconnecting", port_id, waited);
        // Stop and start on EAL's interrupt thread, where memif runs its control channel.
        run_on_interrupt_thread(&restart_device, reinterpret_cast<void *>(uintptr_t(port_id)));
    }
    return link_is_up(port_id);
}

class DpdkPort final : public Port {
public:
    DpdkPort(const DeviceSpec &spec, const Opened &o, NetAddr local, rte_mempool *pool, rte_mempool *hdr_pool,
             rte_device *dma_device, uint8_t mtu, bool multi_seg)
        : spec_(spec), opened_(o), local_(local), pool_(pool), hdr_pool_(hdr_pool), regions_(std::make_unique<TxRegions>(dma_device)), mtu_(mtu),
          multi_seg_(multi_seg) {
        l2_.vlan = spec.vlan;
        l2_.pcp = spec.pcp;
        l2_.dscp = spec.dscp;
        rte_ether_addr a;
        rte_eth_macaddr_get(o.port_id, &a);
        std::memcpy(mac_.b, a.addr_bytes, 6);
        if (spec.has_mac) {
            // ibex frames with this source MAC and accepts frames to it; the PMD is told
            // too where it filters (a NIC), which memif and af_* do not need.
            std::memcpy(mac_.b, spec.mac, 6);
            std::memcpy(a.addr_bytes, spec.mac, 6);
            rte_eth_dev_default_mac_addr_set(o.port_id, &a);
        }
        for (const auto &n : spec.neighbours) {
            Mac m;
            std::memcpy(m.b, n.mac, 6);
            neigh_.add_static(n.ip, m);
        }
        unresolved_.reserve(kUnresolvedMax);
        sleep_us_ = spec.sleep_us ? spec.sleep_us
                                  : static_cast<uint32_t>(config::get_int("IBEX_DPDK_SLEEP_US", 200, 1, 1000000));
        setup_wait();
        prefault_mempool(pool_);
        prefault_mempool(hdr_pool_);
        rings_warm_ = spec_.target != Target::kMemif;
    }

    ~DpdkPort() override {
        release_held();
        for (uint16_t i = stash_pos_; i < stash_count_; ++i) rte_pktmbuf_free(stash_[i]);
        for (uint16_t i = hdr_stash_pos_; i < hdr_stash_count_; ++i) rte_pktmbuf_free(hdr_stash_[i]);
        for (auto &u : unresolved_) rte_pktmbuf_free(u.m);
        if (spec_.target == Target::kMemif && gate_.open() && link_up()) say_leaving();
        // On EAL's interrupt thread, where memif handles its peer's disconnect: 22.11 can
        // crash when both disconnect the same device at once.
        // (The request owns its copy of what it needs: on a timeout it may still run later.)
        run_on_interrupt_thread(&close_device, new Opened(opened_));
        if (timer_fd_ >= 0) close(timer_fd_);
        if (opened_.lock_fd >= 0) {
            // The server chosen by lock tidies up (a client never holds the lock).
            unlink(opened_.server_socket.c_str());
            unlink(opened_.lock_path.c_str());
            close(opened_.lock_fd);
        }
        regions_.reset(); // its shinfos live on while mbufs hold them; none do after close
        rte_mempool_free(pool_);
        rte_mempool_free(hdr_pool_);
        IBEX_LOG(info,
                 "dpdk port %s closed: tx zero-copy %llu, tx copied %llu (PMD cannot chain), tx dropped %llu, "
                 "waited for ARP %llu, ARP requests %llu, replies %llu, rx not for us %llu",
                 spec_name().c_str(), (unsigned long long)stats_.tx_zero_copy, (unsigned long long)stats_.tx_copied,
                 (unsigned long long)stats_.tx_dropped, (unsigned long long)stats_.tx_unresolved,
                 (unsigned long long)stats_.arp_requests, (unsigned long long)stats_.arp_replies,
                 (unsigned long long)stats_.rx_not_for_us);
    }

    NetAddr local() const override { return local_; }
    uint8_t max_mtu() const override { return mtu_; }
    int wait_fd() const override { return intr_fd_ >= 0 ? intr_fd_ : timer_fd_; }
    uint64_t tx_dropped() const override { return stats_.tx_dropped; }
    DpdkPortStats stats() const {
        DpdkPortStats s = stats_;
        s.rx_interrupts = intr_fd_ >= 0;
        s.multi_seg = multi_seg_;
        return s;
    }
    // What the receive ring holds: the engine keeps in flight what fits (memif's ring is
    // the peer-shared one of 2^rsize slots, not rxd).
    size_t rx_buffer_bytes() const override {
        return size_t(opened_.rx_slots ? opened_.rx_slots : spec_.rxd) * (size_t(roce::mtu_bytes(mtu_)) + 64);
    }

    void memory_registered(const void *addr, size_t len) override { regions_->add(addr, len); }
    void memory_deregistered(const void *addr, size_t len) override {
        regions_->remove(addr, len);
        // A NIC may still hold descriptors that point into the region: reclaim them now.
        rte_eth_tx_done_cleanup(opened_.port_id, 0, 0);
    }
    void peer_added(NetAddr peer) override {
        if (!neigh_.find(peer.ip)) ask(peer.ip, now_ns());
    }

    bool arm_wait() override {
        if (intr_fd_ >= 0) {
            rte_eth_dev_rx_intr_enable(opened_.port_id, 0);
            // A frame that arrived before the interrupt was enabled raises none: look once.
            if (stash_pos_ == stash_count_) {
                stash_pos_ = 0;
                stash_count_ = rte_eth_rx_burst(opened_.port_id, 0, stash_, kBurst);
            }
            if (stash_count_ > stash_pos_) {
                rte_eth_dev_rx_intr_disable(opened_.port_id, 0);
                return false;
            }
            return true;
        }
        itimerspec t{};
        t.it_value.tv_sec = sleep_us_ / 1000000;
        t.it_value.tv_nsec = long(sleep_us_ % 1000000) * 1000;
        timerfd_settime(timer_fd_, 0, &t, nullptr);
        return true;
    }
    void wait_done() override {
        uint64_t v;
        if (intr_fd_ >= 0) {
            rte_eth_dev_rx_intr_disable(opened_.port_id, 0);
            [[maybe_unused]] ssize_t r = read(intr_fd_, &v, sizeof v);
        } else {
            [[maybe_unused]] ssize_t r = read(timer_fd_, &v, sizeof v);
        }
    }

    void send(std::span<const TxPacket> pkts) override {
        ensure_lcore();
        if (!gate_.open() && still_quiet()) [[unlikely]] {
            stats_.tx_dropped += pkts.size(); // the peer has left: the wire drops, RC notices
            return;
        }
        uint16_t n = 0;
        for (const TxPacket &p : pkts) {
            if (n == kBurst) {
                transmit(n);
                n = 0;
            }
            const Mac *dst = neigh_.find(p.dst.ip);
            rte_mbuf *m = build(p, dst ? *dst : Mac{});
            if (!m || dst) {
                if (m) tx_[n++] = m;
                continue;
            }
            const uint64_t now = now_ns();
            ask(p.dst.ip, now);
            if (unresolved_.size() < kUnresolvedMax) {
                ++stats_.tx_unresolved;
                unresolved_.push_back({m, p.dst.ip, now});
            } else {
                rte_pktmbuf_free(m);
                ++stats_.tx_dropped;
            }
        }
        transmit(n);
    }

    int recv(std::span<RxPacket> out) override {
        ensure_lcore();
        release_held();
        if (!gate_.open() && still_quiet()) [[unlikely]]
            return 0;
        if (!rings_warm_) [[unlikely]]
            warm_rings();
        int k = 0;
        const uint16_t want = static_cast<uint16_t>(std::min<size_t>(out.size(), kBurst));
        while (k < int(want)) {
            if (stash_pos_ == stash_count_) {
                stash_pos_ = 0;
                stash_count_ = rte_eth_rx_burst(opened_.port_id, 0, stash_, static_cast<uint16_t>(want - k));
                if (!stash_count_) break;
            }
            rte_mbuf *m = stash_[stash_pos_++];
            if (handle_rx(m, &out[k])) {
                held_[held_count_++] = m;
                ++k;
            } else {
                rte_pktmbuf_free(m);
                if (!gate_.open()) return k; // the peer is leaving: no burst until it has
            }
        }
        if (!unresolved_.empty()) flush_unresolved();
        return k;
    }

private:
    std::string spec_name() const { return "port " + std::to_string(opened_.port_id); }

    void setup_wait() {
        // rx interrupts where the PMD has them (the fd is an eventfd it or its peer kicks).
        int fd = -1;
        if (rte_eth_dev_rx_intr_enable(opened_.port_id, 0) == 0) {
            rte_eth_dev_rx_intr_disable(opened_.port_id, 0);
            fd = rte_eth_dev_rx_intr_ctl_q_get_fd(opened_.port_id, 0);
        }
        if (fd >= 0) {
            intr_fd_ = fd;
            fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
        }
        if (intr_fd_ < 0) timer_fd_ = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
        IBEX_LOG(info, "dpdk port %u: %s", opened_.port_id,
                 intr_fd_ >= 0 ? "rx interrupts" : ("no rx interrupts: sleeps at most " + std::to_string(sleep_us_) + " us").c_str());
    }

    // Sends the waiting frames whose neighbour is now known; drops the expired ones.
    void flush_unresolved() {
        const uint64_t now = now_ns();
        uint16_t n = 0;
        size_t keep = 0;
        for (size_t i = 0; i < unresolved_.size(); ++i) {
            Unresolved u = unresolved_[i];
            if (const Mac *mac = neigh_.find(u.ip)) {
                std::memcpy(rte_pktmbuf_mtod(u.m, uint8_t *), mac->b, 6);
                if (n == kBurst) {
                    transmit(n);
                    n = 0;
                }
                tx_[n++] = u.m;
            } else if (now - u.since > kUnresolvedTtl) {
                rte_pktmbuf_free(u.m);
                ++stats_.tx_dropped;
            } else {
                ask(u.ip, now);
                unresolved_[keep++] = u;
            }
        }
        unresolved_.resize(keep);
        transmit(n);
    }

    // Once a memif link is up, its rings are mapped: prefault them (prefault.h). Again
    // after the peer has left, since a new peer brings new regions.
    void warm_rings() {
        if (!link_up()) return;
        const uint64_t t0 = now_ns();
        ring_inodes_.clear();
        const size_t bytes = prefault_memif_regions(&ring_inodes_);
        rings_warm_ = true;
        IBEX_LOG(debug, "dpdk %s: prefaulted %zu KiB of memif regions in %llu us", spec_name().c_str(), bytes / 1024,
                 (unsigned long long)((now_ns() - t0) / 1000));
    }

    // After a memif peer said it is leaving (leave_gate.h): true while the port must be left alone.
    bool still_quiet() {
        if (gate_.answer_due(now_ns())) [[unlikely]] {
            if (send_leave(LeaveOp::stopped)) gate_.answer_sent();
            return true;
        }
        bool stayed = false;
        const uint64_t now = now_ns();
        const bool up = link_up();
        // A peer that reconnects between two reads of the link never shows it down; its
        // predecessor's regions being unmapped says the old connection is gone.
        if (up && !ring_inodes_.empty() && now >= next_region_check_) {
            next_region_check_ = now + kRegionCheckNs;
            if (old_rings_gone()) {
                gate_.peer_gone();
                ring_inodes_.clear();
            }
        }
        if (!gate_.reopens(up, now, &stayed)) return true;
        if (stayed) IBEX_LOG(warn, "dpdk %s: the peer said it was leaving but stayed; polling again", spec_name().c_str());
        return false;
    }

    // None of the memif regions mapped when this link last came up is mapped any more.
    bool old_rings_gone() const {
        const std::vector<uint64_t> now = memif_region_inodes();
        for (uint64_t inode : ring_inodes_)
            if (std::find(now.begin(), now.end(), inode) != now.end()) return false;
        return true;
    }

    bool send_leave(LeaveOp op) { return dpdk::send_leave(opened_.port_id, hdr_pool_, op, mac_); }

    // Closing a connected memif port: tell the peer, and wait (bounded) until it has stopped
    // polling or is gone; only then may the disconnect unmap its rings.
    void say_leaving() {
        bool said = send_leave(LeaveOp::leaving);
        const uint64_t end = now_ns() + kLeaveWaitNs;
        rte_mbuf *burst[kBurst];
        bool answered = false, owe_answer = false, yielded = false;
        while (!answered && link_up() && now_ns() < end) {
            if (!said) said = send_leave(LeaveOp::leaving); // our receiving gives the peer room
            // Both ends closing at once: one must disconnect first while the other touches
            // nothing. The server yields: it answers, then only watches the link.
            if (owe_answer && (yielded = send_leave(LeaveOp::stopped))) break;
            const uint16_t n = rte_eth_rx_burst(opened_.port_id, 0, burst, kBurst);
            for (uint16_t i = 0; i < n; ++i) {
                const rte_mbuf *m = burst[i];
                const ParsedFrame f = parse_frame(rte_pktmbuf_mtod(m, const uint8_t *), m->data_len, local_.port);
                if (f.kind != FrameKind::kLeave) continue;
                if (f.leave_op == LeaveOp::stopped) answered = true;
                else if (opened_.memif_server) owe_answer = true;
            }
            if (n) rte_pktmbuf_free_bulk(burst, n);
            else std::this_thread::sleep_for(std::chrono::microseconds(50));
        }
        if (yielded) {
            // No burst from here on; the client disconnects once it reads the answer.
            const uint64_t until = now_ns() + kLeaveWaitNs;
            while (link_up() && now_ns() < until) std::this_thread::sleep_for(std::chrono::microseconds(50));
            return;
        }
        if (!answered && link_up())
            IBEX_LOG(info, "dpdk %s: the memif peer did not confirm it stopped polling within %llu ms (not an ibex port?)",
                     spec_name().c_str(), (unsigned long long)(kLeaveWaitNs / 1000000));
    }

    bool link_up() const { return link_is_up(opened_.port_id); }

    void release_held() {
        if (held_count_) rte_pktmbuf_free_bulk(held_, held_count_);
        held_count_ = 0;
    }

    void ask(uint32_t ip, uint64_t now) {
        if (!neigh_.should_ask(ip, now, kArpInterval)) return;
        ++stats_.arp_requests;
        send_arp(RTE_ARP_OP_REQUEST, kBroadcast, ip);
    }

    void send_arp(uint16_t op, const Mac &dst_mac, uint32_t dst_ip) {
        rte_mbuf *m = rte_pktmbuf_alloc(hdr_pool_);
        if (!m) return;
        uint8_t *d = rte_pktmbuf_mtod(m, uint8_t *);
        const size_t len = write_arp(d, l2_, op, mac_, local_.ip, dst_mac, dst_ip);
        m->data_len = static_cast<uint16_t>(len);
        m->pkt_len = static_cast<uint32_t>(len);
        if (rte_eth_tx_burst(opened_.port_id, 0, &m, 1) != 1) rte_pktmbuf_free(m);
    }

    // A fresh header-pool mbuf. A zero-copy frame takes three (headers, payload, trailer):
    // they are taken from the pool a burst at a time.
    rte_mbuf *hdr_mbuf() {
        if (hdr_stash_pos_ == hdr_stash_count_) {
            hdr_stash_pos_ = hdr_stash_count_ = 0;
            if (rte_pktmbuf_alloc_bulk(hdr_pool_, hdr_stash_, kBurst) != 0) return rte_pktmbuf_alloc(hdr_pool_);
            hdr_stash_count_ = kBurst;
        }
        return hdr_stash_[hdr_stash_pos_++];
    }

    // Appends a copy of [p, p + len) to the chain ending at *tail.
    bool append_copy(rte_mbuf *head, rte_mbuf **tail, const void *p, uint32_t len) {
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
    rte_mbuf *build(const TxPacket &p, const Mac &dst_mac) {
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
            write_roce_headers(d, l2_, mac_, dst_mac, local_, p.dst, p.tos, p.len);
            size_t off = hl;
            for (int i = 0; i < p.npieces; ++i) {
                std::memcpy(d + off, p.pieces[i].iov_base, p.pieces[i].iov_len);
                off += p.pieces[i].iov_len;
            }
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
        write_roce_headers(rte_pktmbuf_mtod(head, uint8_t *), l2_, mac_, dst_mac, local_, p.dst, p.tos, p.len);
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

    void transmit(uint16_t n) {
        uint16_t done = 0;
        uint64_t give_up = 0;
        for (uint32_t attempt = 0; done < n; ++attempt) {
            const uint16_t r = rte_eth_tx_burst(opened_.port_id, 0, tx_ + done, static_cast<uint16_t>(n - done));
            done = static_cast<uint16_t>(done + r);
            if (!r && !link_up()) break; // no peer (a memif server alone): the wire drops
            // The ring is full: the peer drains it when it next polls; on a shared core
            // it needs the CPU to do so. Past the bound the wire drops, and RC resends.
            if (done < n && !r) {
                if ((attempt & 15) == 0) {
                    const uint64_t now = now_ns();
                    if (!give_up) give_up = now + kTxWaitNs;
                    else if (now > give_up) break;
                }
                sched_yield();
            }
        }
        if (done < n) {
            rte_pktmbuf_free_bulk(tx_ + done, n - done);
            stats_.tx_dropped += n - done;
        }
    }

    // Classifies one received frame; true if it is a RoCE packet for us, now in *out.
    bool handle_rx(rte_mbuf *m, RxPacket *out) {
        const uint8_t *data = rte_pktmbuf_mtod(m, const uint8_t *);
        size_t len = m->data_len;
        if (m->nb_segs > 1) {
            // A frame the PMD spread over segments: linearise it (rare with our data room).
            if (m->pkt_len > sizeof linear_[0]) return false;
            data = static_cast<const uint8_t *>(rte_pktmbuf_read(m, 0, m->pkt_len, linear_[held_count_]));
            len = m->pkt_len;
        }
        ParsedFrame f = parse_frame(data, len, local_.port);
        // Promiscuous PMDs (af_packet, af_xdp on a shared segment) see others' frames too.
        if (!(f.dst_mac == mac_) && !(f.dst_mac.b[0] & 1)) {
            ++stats_.rx_not_for_us;
            return false;
        }
        if (f.kind == FrameKind::kRoce) {
            if (f.pkt.dst.ip != local_.ip) {
                ++stats_.rx_not_for_us;
                return false;
            }
            if (!neigh_.find(f.pkt.src.ip)) neigh_.learn(f.pkt.src.ip, f.src_mac);
            *out = f.pkt;
            return true;
        }
        if (f.kind == FrameKind::kLeave) {
            if (f.leave_op == LeaveOp::leaving) {
                // The last burst on this port until the link cycles; a full ring is retried
                // (still_quiet) while the leaver still waits for it.
                gate_.peer_leaving(now_ns(), send_leave(LeaveOp::stopped));
                rings_warm_ = false;
                ++stats_.peer_leaves;
            }
            return false;
        }
        if (f.kind == FrameKind::kArp) {
            if (f.arp_sender_ip && !f.arp_sender_mac.is_zero()) neigh_.learn(f.arp_sender_ip, f.arp_sender_mac);
            if (f.arp_op == RTE_ARP_OP_REQUEST && f.arp_target_ip == local_.ip) {
                ++stats_.arp_replies;
                send_arp(RTE_ARP_OP_REPLY, f.arp_sender_mac, f.arp_sender_ip);
            }
            return false;
        }
        ++stats_.rx_not_for_us;
        return false;
    }

    DeviceSpec spec_;
    Opened opened_;
    NetAddr local_;
    rte_mempool *pool_;
    rte_mempool *hdr_pool_;
    std::unique_ptr<TxRegions> regions_;
    uint8_t mtu_;
    bool multi_seg_;
    L2Options l2_;
    Mac mac_;
    LeaveGate gate_;
    bool rings_warm_ = true; // false: a memif link whose rings are not yet prefaulted
    std::vector<uint64_t> ring_inodes_; // memif regions mapped when the link last came up
    uint64_t next_region_check_ = 0;    // while the gate waits: when to look at them again
    NeighbourTable neigh_;
    uint32_t sleep_us_ = 200;
    int intr_fd_ = -1;
    int timer_fd_ = -1;

    rte_mbuf *tx_[kBurst];
    rte_mbuf *stash_[kBurst];
    uint16_t stash_pos_ = 0;
    uint16_t stash_count_ = 0;
    rte_mbuf *held_[kBurst];
    uint16_t held_count_ = 0;
    rte_mbuf *hdr_stash_[kBurst];
    uint16_t hdr_stash_pos_ = 0;
    uint16_t hdr_stash_count_ = 0;
    uint8_t linear_[kBurst][9216];

    struct Unresolved {
        rte_mbuf *m;
        uint32_t ip;
        uint64_t since;
    };
    std::vector<Unresolved> unresolved_;

    DpdkPortStats stats_;
};


} // namespace
} // namespace dpdk

bool dpdk_port_stats(const Port &port, DpdkPortStats *out) {
    const auto *p = dynamic_cast<const dpdk::DpdkPort *>(&port);
    if (!p) return false;
    *out = p->stats();
    return true;
}

std::unique_ptr<Port> open_dpdk_port(const DpdkPortOptions &opts, ibex_status_t *status) {
    using namespace dpdk;
    DeviceSpec spec;
    std::string err;
    if (!parse_device(opts.device, &spec, &err)) {
        *status = fail(IBEX_ERR_INVALID_ARGUMENT, "%s: %s", opts.device.c_str(), err.c_str());
        return nullptr;
    }
    if (!parse_neighbours(config::get_string("IBEX_DPDK_NEIGH", ""), &spec.neighbours)) {
        *status = fail(IBEX_ERR_INVALID_ARGUMENT, "IBEX_DPDK_NEIGH: expected ip@mac[;ip@mac...]");
        return nullptr;
    }
    if (spec.vlan < 0) spec.vlan = static_cast<int>(config::get_int("IBEX_DPDK_VLAN", -1, -1, 4094));
    if (spec.pcp < 0) spec.pcp = static_cast<int>(config::get_int("IBEX_DPDK_PCP", -1, -1, 7));
    if (spec.dscp < 0) spec.dscp = static_cast<int>(config::get_int("IBEX_DPDK_DSCP", -1, -1, 63));
    if ((*status = ensure_eal()) != IBEX_OK) return nullptr;

    Opened o;
    *status = attach_device(spec, opts.device, &o);
    auto give_up = [&](ibex_status_t st) -> std::unique_ptr<Port> {
        if (!o.vdev_name.empty()) close_device(new Opened(o));
        if (o.lock_fd >= 0) close(o.lock_fd);
        *status = st;
        return nullptr;
    };
    if (*status != IBEX_OK) return give_up(*status);

    // The local IPv4 address: the name's ip=, the context attribute, IBEX_DPDK_IP, the
    // netdev's own address, or for memif a fixed pair by role.
    uint32_t ip = spec.ip;
    const std::string attr_ip = opts.local_addr.empty() ? std::string(config::get_string("IBEX_DPDK_IP", "")) : opts.local_addr;
    if (!ip && !attr_ip.empty() && !parse_ipv4(attr_ip, &ip))
        return give_up(fail(IBEX_ERR_INVALID_ARGUMENT, "%s: local address \"%s\" is not IPv4", opts.device.c_str(), attr_ip.c_str()));
    if (!ip && (spec.target == Target::kAfPacket || spec.target == Target::kAfXdp)) ip = netdev_ipv4(spec.name);
    if (!ip && spec.target == Target::kMemif) ip = o.memif_server ? 0x0afe0001u : 0x0afe0002u; // 10.254.0.1 / .2
    if (!ip)
        return give_up(fail(IBEX_ERR_INVALID_ARGUMENT, "%s: no IPv4 address: give ip=A.B.C.D in the name or IBEX_DPDK_IP",
                            opts.device.c_str()));

    rte_eth_dev_info info;
    if (rte_eth_dev_info_get(o.port_id, &info) != 0)
        return give_up(fail(IBEX_ERR_NO_DEVICE, "%s: no device info for port %u", opts.device.c_str(), o.port_id));
    // The MTU: the netdev's for af_packet/af_xdp (the kernel side must carry the frames),
    // else what a 4 KiB RoCE MTU needs (IBEX_DPDK_MTU) within what the PMD allows.
    int mtu = o.netdev_mtu ? o.netdev_mtu : static_cast<int>(config::get_int("IBEX_DPDK_MTU", kDefaultMtu, 1280, 65535));
    // The MTU ethdev is told: within what the PMD advertises. memif advertises a plain
    // Ethernet frame (1518) yet carries any frame its buffer chains hold, so for memif
    // the larger MTU stays ibex's own.
    int dev_mtu = mtu;
    if (info.max_mtu && dev_mtu > info.max_mtu) dev_mtu = info.max_mtu;
    if (info.max_rx_pktlen > RTE_ETHER_HDR_LEN + RTE_ETHER_CRC_LEN &&
        dev_mtu > int(info.max_rx_pktlen - RTE_ETHER_HDR_LEN - RTE_ETHER_CRC_LEN))
        dev_mtu = int(info.max_rx_pktlen - RTE_ETHER_HDR_LEN - RTE_ETHER_CRC_LEN);
    if (spec.target != Target::kMemif) mtu = dev_mtu;
    const bool multi_seg = (info.tx_offload_capa & RTE_ETH_TX_OFFLOAD_MULTI_SEGS) != 0;

    const std::string pname = "ibex" + std::to_string(getpid()) + "_" + std::to_string(o.port_id);
    uint32_t room = RTE_PKTMBUF_HEADROOM + static_cast<uint32_t>(mtu) + 64;
    if (spec.target == Target::kAfPacket) room = RTE_PKTMBUF_HEADROOM + af_packet_frame(o.netdev_mtu);
    // Receive ring + transmit ring + frames awaiting ARP, with room for the per-lcore caches.
    const unsigned nmbufs = spec.rxd + spec.txd + unsigned(kUnresolvedMax) + 4 * kBurst;
    rte_mempool *pool = rte_pktmbuf_pool_create(("p" + pname).c_str(), nmbufs, 128, 0, static_cast<uint16_t>(room),
                                                static_cast<int>(rte_socket_id()));
    rte_mempool *hdr_pool = rte_pktmbuf_pool_create(("h" + pname).c_str(), 3 * nmbufs, 128, 0,
                                                    RTE_PKTMBUF_HEADROOM + kHeaderRoom, static_cast<int>(rte_socket_id()));
    if (!pool || !hdr_pool) {
        const int e = rte_errno;
        rte_mempool_free(pool);
        rte_mempool_free(hdr_pool);
        return give_up(fail(IBEX_ERR_NO_MEMORY, "%s: cannot create mbuf pools (%u mbufs of %u bytes): %s (raise -m in IBEX_DPDK_ARGS)",
                            opts.device.c_str(), nmbufs, room, rte_strerror(e)));
    }
    auto fail_pools = [&](ibex_status_t st) {
        rte_mempool_free(pool);
        rte_mempool_free(hdr_pool);
        return give_up(st);
    };

    rte_eth_conf conf{};
    conf.rxmode.mtu = static_cast<uint32_t>(dev_mtu);
    if (multi_seg) conf.txmode.offloads |= RTE_ETH_TX_OFFLOAD_MULTI_SEGS;
    conf.intr_conf.rxq = 1;
    int r = rte_eth_dev_configure(o.port_id, 1, 1, &conf);
    if (r != 0) {
        conf.intr_conf.rxq = 0; // the PMD has no rx interrupts: bounded sleeping instead
        r = rte_eth_dev_configure(o.port_id, 1, 1, &conf);
    }
    uint16_t rxd = spec.rxd, txd = spec.txd;
    if (r == 0) r = rte_eth_dev_adjust_nb_rx_tx_desc(o.port_id, &rxd, &txd);
    if (r == 0) r = rte_eth_rx_queue_setup(o.port_id, 0, rxd, rte_eth_dev_socket_id(o.port_id), nullptr, pool);
    if (r == 0) r = rte_eth_tx_queue_setup(o.port_id, 0, txd, rte_eth_dev_socket_id(o.port_id), nullptr);
    if (r == 0) r = rte_eth_dev_start(o.port_id);
    if (r != 0)
        return fail_pools(fail(IBEX_ERR_SYSTEM, "%s: cannot start ethdev port %u (%s): %s", opts.device.c_str(), o.port_id,
                               info.driver_name, rte_strerror(-r)));
    spec.rxd = rxd;
    spec.txd = txd;

    // A client's link comes up once the server answers; wait for it (bounded) so the first
    // packets are not lost. A server waits for no one.
    const bool memif_client = spec.target == Target::kMemif && !o.memif_server;
    if (!o.memif_server && !wait_for_link(o.port_id, memif_client) && memif_client) {
        // Nothing would ever arrive: say so now rather than as a retry timeout later.
        const ibex_status_t st =
            fail(IBEX_ERR_REMOTE, "%s: the memif server on %s did not accept this client within %d ms (a memif socket "
                 "joins exactly two ports: one socket per pair of ranks, or ibex_switch for more)",
                 opts.device.c_str(), o.memif_socket.c_str(), kMemifLinkWaitMs);
        run_on_interrupt_thread(&close_device, new Opened(o));
        o.vdev_name.clear();
        return fail_pools(st);
    }

    // A bus device (a NIC) DMAs from the payload pages, which must be registered and mapped.
    rte_device *dma_dev = nullptr;
    if (info.device && std::strcmp(rte_bus_name(rte_dev_bus(info.device)), "vdev") != 0) dma_dev = info.device;
    uint8_t ib_mtu = roce::mtu_enum_for_netdev(mtu);
    if (!ib_mtu) ib_mtu = IBEX_MTU_256;
    NetAddr local{ip, opts.port ? opts.port : roce::kUdpPort};
    auto port = std::make_unique<DpdkPort>(spec, o, local, pool, hdr_pool, dma_dev, ib_mtu, multi_seg);
    IBEX_LOG(info, "dpdk port %s: ethdev %u (%s%s) %s mtu %d (IB %d), tx %s", opts.device.c_str(), o.port_id,
             info.driver_name, spec.target == Target::kMemif ? (o.memif_server ? ", memif server" : ", memif client") : "",
             ip_text(ip).c_str(), mtu, roce::mtu_bytes(ib_mtu), multi_seg ? "zero-copy (chained extbuf)" : "by copy");
    *status = IBEX_OK;
    return port;
}

} // namespace ibex::soft
