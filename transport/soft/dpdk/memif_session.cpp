#include "transport/soft/dpdk/memif_session.h"

#include <algorithm>
#include <chrono>
#include <thread>
#include <utility>

#include <rte_ethdev.h>
#include <rte_mbuf.h>

#include "runtime/base/log.h"
#include "transport/soft/dpdk/ethdev_io.h"
#include "transport/soft/dpdk/memif_unmap_guard.h"
#include "transport/soft/dpdk/prefault.h"

namespace ibex::soft::dpdk {
namespace {

constexpr uint64_t kLeaveWaitNs = LeaveGate::kLeaverWaitNs; // how long a closing port waits for its peer
constexpr uint64_t kRegionCheckNs = 1000000; // a closed gate reads /proc/self/maps at most this often

} // namespace

bool send_leave(uint16_t port_id, rte_mempool *pool, LeaveOp op, const Mac &src_mac) {
    rte_mbuf *m = rte_pktmbuf_alloc(pool);
    if (!m) return false;
    auto *p = reinterpret_cast<uint8_t *>(rte_pktmbuf_append(m, kLeaveFrameLen));
    if (!p) {
        rte_pktmbuf_free(m);
        return false;
    }
    write_leave(p, op, src_mac);
    MemifBurst burst(true);
    if (rte_eth_tx_burst(port_id, 0, &m, 1) == 1) return true;
    rte_pktmbuf_free(m);
    return false;
}

MemifSession::MemifSession(bool memif, uint16_t port_id, bool memif_server, rte_mempool *leave_pool, const Mac &mac,
                           std::string name)
    : memif_(memif), port_id_(port_id), memif_server_(memif_server), pool_(leave_pool), mac_(mac), name_(std::move(name)),
      warm_(!memif) {}

void MemifSession::peer_leaving() {
    // The last burst on this port until the link cycles; a full ring is retried
    // (still_quiet) while the leaver still waits for it.
    gate_.peer_leaving(now_ns(), send(LeaveOp::stopped));
    warm_ = false;
    ++peer_leaves_;
}

bool MemifSession::still_quiet() {
    if (gate_.answer_due(now_ns())) [[unlikely]] {
        if (send(LeaveOp::stopped)) gate_.answer_sent();
        return true;
    }
    bool stayed = false;
    const uint64_t now = now_ns();
    const bool up = link_is_up(port_id_);
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
    if (stayed) IBEX_LOG(warn, "dpdk %s: the peer said it was leaving but stayed; polling again", name_.c_str());
    return false;
}

void MemifSession::warm_rings() {
    if (!link_is_up(port_id_)) return;
    const uint64_t t0 = now_ns();
    ring_inodes_.clear();
    const size_t bytes = prefault_memif_regions(&ring_inodes_);
    warm_ = true;
    IBEX_LOG(debug, "dpdk %s: prefaulted %zu KiB of memif regions in %llu us", name_.c_str(), bytes / 1024,
             (unsigned long long)((now_ns() - t0) / 1000));
}

bool MemifSession::old_rings_gone() const {
    const std::vector<uint64_t> now = memif_region_inodes();
    for (uint64_t inode : ring_inodes_)
        if (std::find(now.begin(), now.end(), inode) != now.end()) return false;
    return true;
}

void MemifSession::leave() {
    if (!memif_) return;
    // A peer that is leaving was told this side stopped (quiet() retries an answer that
    // found no room): it disconnects once it reads that, and may be mid-burst until then,
    // so disconnecting first would unmap the rings under that burst. Wait for it to go,
    // bounded as the leaver's own wait; a peer that turns out new or staying (the gate
    // reopens) is told this side is leaving instead.
    const uint64_t until = now_ns() + kLeaveWaitNs;
    while (link_is_up(port_id_) && quiet() && now_ns() < until) std::this_thread::sleep_for(std::chrono::microseconds(50));
    if (!gate_.open() || !link_is_up(port_id_)) return;
    bool said = send(LeaveOp::leaving);
    const uint64_t end = now_ns() + kLeaveWaitNs;
    rte_mbuf *burst[kBurst];
    bool answered = false, owe_answer = false, yielded = false;
    while (!answered && link_is_up(port_id_) && now_ns() < end) {
        if (!said) said = send(LeaveOp::leaving); // our receiving gives the peer room
        // Both ends closing at once: one must disconnect first while the other touches
        // nothing. The server yields: it answers, then only watches the link.
        if (owe_answer && (yielded = send(LeaveOp::stopped))) break;
        uint16_t n;
        {
            MemifBurst guard(true);
            n = rte_eth_rx_burst(port_id_, 0, burst, kBurst);
        }
        for (uint16_t i = 0; i < n; ++i) {
            const rte_mbuf *m = burst[i];
            // Only the frame's kind matters here, not which UDP port RoCE uses.
            const ParsedFrame f = parse_frame(rte_pktmbuf_mtod(m, const uint8_t *), m->data_len, 0);
            if (f.kind != FrameKind::kLeave) continue;
            if (f.leave_op == LeaveOp::stopped) answered = true;
            else if (memif_server_) owe_answer = true;
        }
        if (n) rte_pktmbuf_free_bulk(burst, n);
        else std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    if (yielded) {
        wait_until_peer_gone(); // no burst from here on; the client disconnects once it reads the answer
        return;
    }
    if (!answered && link_is_up(port_id_))
        IBEX_LOG(info, "dpdk %s: the memif peer did not confirm it stopped polling within %llu ms (not an ibex port?)",
                 name_.c_str(), (unsigned long long)(kLeaveWaitNs / 1000000));
}

void MemifSession::wait_until_peer_gone() const {
    const uint64_t until = now_ns() + kLeaveWaitNs;
    while (link_is_up(port_id_) && now_ns() < until) std::this_thread::sleep_for(std::chrono::microseconds(50));
}

} // namespace ibex::soft::dpdk
