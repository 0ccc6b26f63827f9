#include "transport/soft/dpdk/memif_fabric.h"

#include <algorithm>
#include <span>
#include <utility>

#include <rte_mbuf.h>

#include "transport/soft/dpdk/device_spec.h"
#include "transport/soft/dpdk/dpdk_port_internal.h"

namespace ibex::soft {
namespace dpdk {
namespace {

constexpr uint16_t kPollBurst = 32;
// Frames read from a link and waiting for their destination port's recv(); beyond this
// the switch is not keeping up and the frame is dropped as a full input buffer would.
constexpr size_t kPendingMax = 1024;

// The links and the frames between them: frames from any link are sorted by destination
// IP into the destination port's pending list, which that port's recv() hands out (so the
// switch sees, as on udp, "arrived for port j from endpoint i"). Driven from one thread.
class MemifFabric {
public:
    ~MemifFabric() {
        // Before any link closes: a link's frames may wait in another's list.
        for (Link &l : links_) {
            release(l.given);
            release(l.pending);
        }
    }

    ibex_status_t open(const std::vector<MemifFabricPort> &ports) {
        links_.reserve(ports.size());
        for (const MemifFabricPort &spec : ports) {
            DpdkPortOptions o;
            o.device = "dpdk:memif:" + spec.socket + ",role=server";
            o.local_addr = format_ipv4(spec.endpoint_ip); // the address this link serves
            o.whole_frames = true;
            ibex_status_t st;
            std::unique_ptr<DpdkPort> port = open_dpdk_port_object(o, &st);
            if (!port) return st;
            std::vector<uint32_t> others;
            for (const MemifFabricPort &other : ports)
                if (other.endpoint_ip != spec.endpoint_ip) others.push_back(other.endpoint_ip);
            port->proxy_arp(std::move(others));
            links_.push_back({std::move(port), spec.endpoint_ip, {}, {}});
        }
        return IBEX_OK;
    }

    uint32_t endpoint_ip(size_t port) const { return links_[port].endpoint_ip; }
    uint8_t max_mtu(size_t port) const { return links_[port].port->max_mtu(); }

    int recv(size_t port, std::span<RxPacket> out) {
        Link &l = links_[port];
        release(l.given);
        if (l.pending.empty()) poll_links();
        const size_t n = std::min(out.size(), l.pending.size());
        for (size_t k = 0; k < n; ++k) out[k] = l.pending[k].pkt;
        l.given.assign(l.pending.begin(), l.pending.begin() + long(n));
        l.pending.erase(l.pending.begin(), l.pending.begin() + long(n));
        return int(n);
    }

    void send(std::span<const TxPacket> pkts) {
        for (const TxPacket &p : pkts) {
            const int j = link_of(p.dst.ip);
            if (j < 0) {
                ++unroutable_;
                continue;
            }
            links_[size_t(j)].port->send(std::span<const TxPacket>(&p, 1));
        }
    }

    uint64_t tx_dropped() const {
        uint64_t n = unroutable_;
        for (const Link &l : links_) n += l.port->tx_dropped();
        return n;
    }

private:
    struct Held {
        rte_mbuf *m;
        RxPacket pkt; // its bytes are m's
    };
    struct Link {
        std::unique_ptr<DpdkPort> port;
        uint32_t endpoint_ip;
        std::vector<Held> pending, given;
    };

    static void release(std::vector<Held> &v) {
        for (const Held &h : v) rte_pktmbuf_free(h.m);
        v.clear();
    }

    int link_of(uint32_t ip) const {
        for (size_t i = 0; i < links_.size(); ++i)
            if (links_[i].endpoint_ip == ip) return int(i);
        return -1;
    }

    void poll_links() {
        rte_mbuf *burst[kPollBurst];
        RxPacket pkts[kPollBurst];
        for (const Link &in : links_) {
            const uint16_t n = in.port->take_frames(burst, pkts, kPollBurst);
            for (uint16_t k = 0; k < n; ++k) {
                const int j = link_of(pkts[k].dst.ip);
                if (j < 0 || links_[size_t(j)].pending.size() >= kPendingMax) {
                    rte_pktmbuf_free(burst[k]);
                    continue;
                }
                pkts[k].src = {in.endpoint_ip, 0}; // the switch knows its ingress by this
                links_[size_t(j)].pending.push_back({burst[k], pkts[k]});
            }
        }
    }

    std::vector<Link> links_;
    uint64_t unroutable_ = 0; // sent to an address no link serves
};

class FabricPort final : public Port {
public:
    FabricPort(std::shared_ptr<MemifFabric> fabric, size_t index) : fabric_(std::move(fabric)), index_(index) {}
    NetAddr local() const override { return {fabric_->endpoint_ip(index_), 0}; }
    uint8_t max_mtu() const override { return fabric_->max_mtu(index_); }
    void send(std::span<const TxPacket> pkts) override { fabric_->send(pkts); }
    int recv(std::span<RxPacket> out) override { return fabric_->recv(index_, out); }
    int wait_fd() const override { return -1; } // frames for it arrive on any link: polled
    uint64_t tx_dropped() const override { return fabric_->tx_dropped(); } // the whole fabric's
    bool whole_frames() const override { return true; }

private:
    std::shared_ptr<MemifFabric> fabric_;
    size_t index_;
};

} // namespace
} // namespace dpdk

std::vector<std::unique_ptr<Port>> open_memif_fabric(const std::vector<MemifFabricPort> &ports, ibex_status_t *status) {
    std::vector<std::unique_ptr<Port>> out;
    auto fabric = std::make_shared<dpdk::MemifFabric>();
    if ((*status = fabric->open(ports)) != IBEX_OK) return out;
    for (size_t i = 0; i < ports.size(); ++i) out.push_back(std::make_unique<dpdk::FabricPort>(fabric, i));
    return out;
}

} // namespace ibex::soft
