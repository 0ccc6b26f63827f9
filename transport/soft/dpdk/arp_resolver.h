// The link addresses a dpdk port sends to: its neighbour table (static entries, and what
// ARP and received frames teach it), ARP requests (at most one per interval for an
// address), answers to requests for its own address (or, for ibex_switch's ports, proxy
// answers for the addresses it stands in for), and the frames that wait for a reply, as
// the kernel's unresolved queue does, so a connection's first packets are not lost.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "transport/soft/dpdk/dpdk_port.h"
#include "transport/soft/dpdk/ethdev_io.h"
#include "transport/soft/dpdk/frame.h"
#include "transport/soft/dpdk/neighbour_table.h"

struct rte_mbuf;
struct rte_mempool;

namespace ibex::soft::dpdk {

class ArpResolver {
public:
    // Frames go out through io from `pool`, framed with l2 from mac/ip; counts go to stats.
    ArpResolver(EthdevIo &io, rte_mempool *pool, const L2Options &l2, const Mac &mac, uint32_t ip, DpdkPortStats &stats);
    ~ArpResolver() { clear(); }
    ArpResolver(const ArpResolver &) = delete;
    ArpResolver &operator=(const ArpResolver &) = delete;

    void add_static(uint32_t ip, const Mac &mac) { neigh_.add_static(ip, mac); }
    // The kernel owns ARP on `ifname` (an af_xdp port whose XDP program hands it every frame
    // but RoCEv2): neighbours come from the kernel's table, and asking for one prompts the
    // kernel to resolve it, instead of ARP frames of the port's own whose replies the
    // kernel would take.
    void use_kernel_neighbours(std::string ifname) { kernel_if_ = std::move(ifname); }
    // Answer requests for these addresses instead of for this port's own (proxy ARP).
    void answer_for(std::vector<uint32_t> ips) { proxy_ = std::move(ips); }

    const Mac *find(uint32_t ip) { return neigh_.find(ip); }
    // The source of a RoCE frame, unless the address is known already.
    void learn_source(uint32_t ip, const Mac &mac) {
        if (!neigh_.find(ip)) neigh_.learn(ip, mac);
    }
    // An ARP frame arrived: learns its sender, answers a request for an address it serves.
    void on_arp(const ParsedFrame &f);
    // Asks for ip unless it was asked for within the interval.
    void ask(uint32_t ip, uint64_t now);

    // A frame built for an unresolved neighbour: it waits for the reply (bounded in number
    // and age), after a request.
    void hold(rte_mbuf *m, uint32_t ip, uint64_t now);
    bool waiting() const { return !unresolved_.empty(); }
    // Sends the waiting frames whose neighbour is now known; drops the expired ones.
    void flush();
    // Frees the waiting frames (a closing port, before its pool goes).
    void clear();

    static constexpr size_t kUnresolvedMax = 1024;

private:
    void send_arp(uint16_t op, const Mac &dst_mac, uint32_t src_ip, uint32_t dst_ip);
    // Kernel mode: the complete entry for ip in the kernel's table on kernel_if_.
    bool kernel_lookup(uint32_t ip, Mac *out) const;
    // Kernel mode: makes the kernel resolve ip (one empty datagram to its discard port).
    void kernel_prompt(uint32_t ip) const;

    struct Unresolved {
        rte_mbuf *m;
        uint32_t ip;
        uint64_t since;
    };

    EthdevIo &io_;
    rte_mempool *pool_;
    L2Options l2_;
    Mac mac_;
    uint32_t ip_;
    DpdkPortStats &stats_;
    NeighbourTable neigh_;
    std::vector<uint32_t> proxy_;
    std::vector<Unresolved> unresolved_;
    std::string kernel_if_;
};

} // namespace ibex::soft::dpdk
