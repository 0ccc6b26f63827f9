// The dpdk port of the soft provider: RoCEv2 frames built by ibex (Ethernet/IPv4/UDP)
// on a DPDK ethdev (memif, af_xdp, af_packet, or a NIC's PMD). Device names and options
// are described in README.md in this folder.
#pragma once

#include <memory>
#include <string>

#include <ibex/ibex.h>

#include "transport/soft/port.h"

namespace ibex::soft {

struct DpdkPortOptions {
    std::string device;     // "dpdk:..."
    std::string local_addr; // overrides the IPv4 address from the name or the environment
    uint16_t port = 0;      // 0: 4791
    // Whole Ethernet frames in and out (port.h, whole_frames()), RoCE frames to any address;
    // what ibex_switch's memif ports are (memif_fabric.h).
    bool whole_frames = false;
};

// What a dpdk port did besides moving packets (for tests, tools and logs).
struct DpdkPortStats {
    uint64_t tx_zero_copy = 0;   // frames whose payload went out attached, not copied
    uint64_t tx_copied = 0;      // frames with registered payload copied: the PMD cannot chain
    uint64_t tx_icrc_filled = 0; // frames whose payload was copied in with the ICRC computed on the way
    uint64_t tx_dropped = 0;
    uint64_t tx_unresolved = 0;  // frames that waited for an ARP reply
    uint64_t arp_requests = 0;
    uint64_t arp_replies = 0;
    uint64_t rx_not_for_us = 0;  // frames dropped by MAC/IP/UDP port
    uint64_t peer_leaves = 0;    // times a memif peer said it was leaving and this port stopped polling
    uint64_t memif_reconnects = 0; // memif client: restarts while opening, its link still down
    bool rx_interrupts = false;  // the wait descriptor is the PMD's rx interrupt
    bool multi_seg = false;      // the PMD takes chained mbufs (zero-copy possible)
};

// Stats of `port` if it is a dpdk port.
bool dpdk_port_stats(const Port &port, DpdkPortStats *out);

// Opens the port (starting EAL on first use) or returns nullptr with the error recorded.
// Built without DPDK, it fails with IBEX_ERR_NOT_SUPPORTED.
std::unique_ptr<Port> open_dpdk_port(const DpdkPortOptions &opts, ibex_status_t *status);

} // namespace ibex::soft
