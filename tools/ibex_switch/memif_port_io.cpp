#include "tools/ibex_switch/memif_port_io.h"

#include <chrono>
#include <cstring>
#include <sstream>
#include <unistd.h>

#include <rte_ethdev.h>
#include <rte_ip.h>
#include <rte_mbuf.h>

#include "runtime/base/status.h"
#include "transport/soft/dpdk/device_spec.h"
#include "transport/soft/dpdk/eal.h"
#include "transport/soft/dpdk/ethdev_attach.h"
#include "transport/soft/dpdk/frame.h"
#include "transport/soft/dpdk/leave_gate.h"
#include "transport/soft/dpdk/prefault.h"

namespace ibex::sw {
namespace dp = ibex::soft::dpdk;

namespace {
constexpr uint16_t kRoceUdpPort = 4791;
constexpr uint16_t kBurst = 32;
constexpr uint16_t kRingDesc = 1024;

// Frames read from a link and waiting for their destination port's recv(); beyond this
// the switch is not keeping up and the frame is dropped as a full input buffer would.
constexpr size_t kPendingMax = 1024;
constexpr uint32_t kFrameRoom = 4608; // a 4096-byte RoCE MTU frame with every header
constexpr int kTxTries = 64;

// The links of all ports and the frames between them. Frames from any link are sorted
// by destination IP into the destination port's pending list; port j's recv() hands out
// its list (so the switch core sees, as on udp, "arrived for port j from endpoint i").
class MemifFabric {
public:
    struct Held {
        rte_mbuf *m;
        uint16_t ingress;
        uint8_t tos;
    };
    struct Link {
        dp::Opened opened;
        uint32_t ip = 0;
        dp::Mac mac;          // the switch port's own
        dp::Mac endpoint_mac; // learned from the endpoint's frames
        bool endpoint_known = false;
        bool attached = false;
        dp::LeaveGate gate; // closed while the endpoint leaves (memif's disconnect race)
        bool warm = false;         // the link's memif regions are prefaulted (dp::prefault_memif_regions)
        std::vector<Held> pending, given;
    };

    ~MemifFabric() {
        for (Link &l : links_) {
            release(l.given);
            release(l.pending);
            if (!l.attached) continue;
            // On EAL's interrupt thread, where memif handles its peer's disconnect.
            dp::run_on_interrupt_thread(&dp::close_device, new dp::Opened(l.opened));
            if (l.opened.lock_fd >= 0) close(l.opened.lock_fd);
            if (!l.opened.server_socket.empty()) unlink(l.opened.server_socket.c_str());
        }
        if (pool_) rte_mempool_free(pool_);
    }

    bool open(const std::vector<MemifPortSpec> &specs, std::string &err) {
        if (dp::ensure_eal() != IBEX_OK) {
            err = std::string("DPDK EAL: ") + ibex_last_error();
            return false;
        }
        const unsigned nmbufs = unsigned(specs.size()) * (2 * kRingDesc + kPendingMax + 4 * kBurst) + 256;
        pool_ = rte_pktmbuf_pool_create(("sw" + std::to_string(getpid())).c_str(), nmbufs, 128, 0,
                                        RTE_PKTMBUF_HEADROOM + kFrameRoom, int(rte_socket_id()));
        if (!pool_) {
            err = "cannot create the mbuf pool (raise -m in IBEX_DPDK_ARGS)";
            return false;
        }
        dp::prefault_mempool(pool_);
        links_.resize(specs.size());
        for (size_t i = 0; i < specs.size(); ++i) {
            const std::string device = "dpdk:memif:" + specs[i].socket + ",role=server";
            dp::DeviceSpec spec;
            if (!dp::parse_device(device, &spec, &err)) return false;
            Link &l = links_[i];
            l.ip = specs[i].endpoint_ip;
            if (dp::attach_device(spec, device, &l.opened) != IBEX_OK) {
                err = ibex_last_error();
                return false;
            }
            l.attached = true;
            rte_eth_conf conf{};
            conf.txmode.offloads = 0;
            uint16_t rxd = kRingDesc, txd = kRingDesc;
            const uint16_t id = l.opened.port_id;
            int r = rte_eth_dev_configure(id, 1, 1, &conf);
            if (r == 0) r = rte_eth_dev_adjust_nb_rx_tx_desc(id, &rxd, &txd);
            if (r == 0) r = rte_eth_rx_queue_setup(id, 0, rxd, rte_eth_dev_socket_id(id), nullptr, pool_);
            if (r == 0) r = rte_eth_tx_queue_setup(id, 0, txd, rte_eth_dev_socket_id(id), nullptr);
            if (r == 0) r = rte_eth_dev_start(id);
            if (r != 0) {
                err = device + ": cannot start ethdev: " + rte_strerror(-r);
                return false;
            }
            rte_ether_addr a;
            rte_eth_macaddr_get(id, &a);
            std::memcpy(l.mac.b, a.addr_bytes, 6);
        }
        return true;
    }

    size_t size() const { return links_.size(); }
    const Link &link(size_t i) const { return links_[i]; }

    int recv(size_t port, std::span<Frame> out) {
        Link &l = links_[port];
        release(l.given);
        if (l.pending.empty()) poll_links();
        const size_t n = std::min(out.size(), l.pending.size());
        for (size_t k = 0; k < n; ++k) {
            const Held &h = l.pending[k];
            out[k].data = rte_pktmbuf_mtod(h.m, uint8_t *);
            out[k].len = h.m->data_len;
            out[k].src = {links_[h.ingress].ip, 0};
            out[k].tos = h.tos;
            l.given.push_back(h);
        }
        l.pending.erase(l.pending.begin(), l.pending.begin() + long(n));
        return int(n);
    }

    bool send(const uint8_t *data, uint32_t len, const Addr &to, uint8_t tos) {
        const int j = link_of(to.ip);
        if (j < 0 || !links_[j].endpoint_known || len < 14 + 20 || len > kFrameRoom) return false;
        Link &l = links_[size_t(j)];
        if (!usable(l)) return false;
        rte_mbuf *m = rte_pktmbuf_alloc(pool_);
        if (!m) return false;
        uint8_t *p = reinterpret_cast<uint8_t *>(rte_pktmbuf_append(m, uint16_t(len)));
        if (!p) {
            rte_pktmbuf_free(m);
            return false;
        }
        std::memcpy(p, data, len);
        // Only what a router changes at L2 and what the congestion point marks; the ICRC
        // masks TOS and the header checksum, so it needs no rewrite.
        std::memcpy(p, l.endpoint_mac.b, 6);
        std::memcpy(p + 6, l.mac.b, 6);
        const size_t l3 = (p[12] == 0x81 && p[13] == 0x00) ? 18 : 14;
        if (len >= l3 + 20) {
            auto *ip = reinterpret_cast<rte_ipv4_hdr *>(p + l3);
            ip->type_of_service = uint8_t((ip->type_of_service & ~0x3) | (tos & 0x3));
            ip->hdr_checksum = 0;
            ip->hdr_checksum = rte_ipv4_cksum(ip);
        }
        return transmit(l, &m, 1) == 1;
    }

private:
    static void release(std::vector<Held> &v) {
        for (const Held &h : v) rte_pktmbuf_free(h.m);
        v.clear();
    }

    int link_of(uint32_t ip) const {
        for (size_t i = 0; i < links_.size(); ++i)
            if (links_[i].ip == ip) return int(i);
        return -1;
    }

    uint16_t transmit(Link &l, rte_mbuf **m, uint16_t n) {
        uint16_t sent = 0;
        for (int t = 0; t < kTxTries && sent < n; ++t) sent += rte_eth_tx_burst(l.opened.port_id, 0, m + sent, n - sent);
        for (uint16_t k = sent; k < n; ++k) rte_pktmbuf_free(m[k]);
        return sent;
    }

    void answer_arp(Link &l, const dp::ParsedFrame &f) {
        // Proxy ARP: every other endpoint is "on the link", at this port's MAC.
        if (f.arp_op != 1 || f.arp_target_ip == l.ip || link_of(f.arp_target_ip) < 0) return;
        rte_mbuf *m = rte_pktmbuf_alloc(pool_);
        if (!m) return;
        uint8_t *p = reinterpret_cast<uint8_t *>(rte_pktmbuf_append(m, dp::kArpFrameMax));
        if (!p) {
            rte_pktmbuf_free(m);
            return;
        }
        const size_t n = dp::write_arp(p, dp::L2Options{}, 2, l.mac, f.arp_target_ip, f.arp_sender_mac, f.arp_sender_ip);
        rte_pktmbuf_trim(m, uint16_t(dp::kArpFrameMax - n));
        transmit(l, &m, 1);
    }

    static uint64_t now_ns() {
        return uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(
                            std::chrono::steady_clock::now().time_since_epoch())
                            .count());
    }

    // False while the link's endpoint is leaving (leave_gate.h): no burst may touch it.
    // Prefaults the link's memif regions once it is up (a new endpoint brings new ones).
    bool usable(Link &l) {
        if (l.gate.open() && l.warm) [[likely]]
            return true;
        if (l.gate.answer_due(now_ns())) {
            if (dp::send_leave(l.opened.port_id, pool_, dp::LeaveOp::stopped, l.mac)) l.gate.answer_sent();
            return false;
        }
        rte_eth_link link{};
        const bool up = rte_eth_link_get_nowait(l.opened.port_id, &link) == 0 && link.link_status;
        bool stayed = false;
        if (!l.gate.open() && !l.gate.reopens(up, now_ns(), &stayed)) return false;
        if (up && !l.warm) {
            dp::prefault_memif_regions();
            l.warm = true;
        }
        return true;
    }

    // The endpoint closes its port: answer that this side stopped polling it (the last
    // burst on the link until it cycles; retried while the endpoint still waits for it).
    void endpoint_leaving(Link &l) {
        l.gate.peer_leaving(now_ns(), dp::send_leave(l.opened.port_id, pool_, dp::LeaveOp::stopped, l.mac));
        l.warm = false;
    }

    void poll_links() {
        rte_mbuf *burst[kBurst];
        for (size_t i = 0; i < links_.size(); ++i) {
            Link &in = links_[i];
            if (!usable(in)) continue;
            const uint16_t n = rte_eth_rx_burst(in.opened.port_id, 0, burst, kBurst);
            for (uint16_t k = 0; k < n; ++k) {
                rte_mbuf *m = burst[k];
                dp::ParsedFrame f;
                if (m->nb_segs == 1) f = dp::parse_frame(rte_pktmbuf_mtod(m, const uint8_t *), m->data_len, kRoceUdpPort);
                if (f.kind != dp::FrameKind::kOther) {
                    in.endpoint_mac = f.src_mac;
                    in.endpoint_known = true;
                }
                if (f.kind == dp::FrameKind::kArp && in.gate.open()) answer_arp(in, f);
                if (f.kind == dp::FrameKind::kLeave && f.leave_op == dp::LeaveOp::leaving && in.gate.open())
                    endpoint_leaving(in);
                const int j = f.kind == dp::FrameKind::kRoce ? link_of(f.pkt.dst.ip) : -1;
                if (j < 0 || links_[size_t(j)].pending.size() >= kPendingMax) {
                    rte_pktmbuf_free(m);
                    continue;
                }
                links_[size_t(j)].pending.push_back({m, uint16_t(i), f.pkt.tos});
            }
        }
    }

    rte_mempool *pool_ = nullptr;
    std::vector<Link> links_;
};

class MemifPortIo final : public PortIo {
public:
    MemifPortIo(std::shared_ptr<MemifFabric> fabric, size_t index) : fabric_(std::move(fabric)), index_(index) {}
    Addr local() const override { return {fabric_->link(index_).ip, 0}; }
    int recv(std::span<Frame> out) override { return fabric_->recv(index_, out); }
    bool send(const uint8_t *data, uint32_t len, const Addr &to, uint8_t tos) override {
        return fabric_->send(data, len, to, tos);
    }
    int wait_fd() const override { return -1; } // memif has no rx interrupts: the switch polls
    bool whole_frames() const override { return true; }

private:
    std::shared_ptr<MemifFabric> fabric_;
    size_t index_;
};
} // namespace

bool parse_memif_ports(const std::string &text, std::vector<MemifPortSpec> &out, std::string &err) {
    std::stringstream ss(text);
    std::string item;
    while (std::getline(ss, item, ',')) {
        const size_t eq = item.rfind('=');
        MemifPortSpec s;
        if (eq == std::string::npos || eq == 0 || !dp::parse_ipv4(item.substr(eq + 1), &s.endpoint_ip)) {
            err = "bad memif port \"" + item + "\" (want SOCKET=IP)";
            return false;
        }
        s.socket = item.substr(0, eq);
        out.push_back(s);
    }
    return true;
}

std::vector<std::unique_ptr<PortIo>> open_memif_ports(const std::vector<MemifPortSpec> &specs, std::string &err) {
    std::vector<std::unique_ptr<PortIo>> ports;
    auto fabric = std::make_shared<MemifFabric>();
    if (!fabric->open(specs, err)) return ports;
    for (size_t i = 0; i < specs.size(); ++i) ports.push_back(std::make_unique<MemifPortIo>(fabric, i));
    return ports;
}

} // namespace ibex::sw
