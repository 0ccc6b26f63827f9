// The dpdk port's class, for the files of this folder that build on it: its bring-up
// (dpdk_port_open.cpp) and ibex_switch's memif fabric (memif_fabric.cpp), which takes
// whole frames from it as mbufs. Its parts: the ethdev queue (ethdev_io.h), the memif
// session (memif_session.h), ARP (arp_resolver.h) and zero-copy payload (tx_regions.h);
// the packet paths are in dpdk_port.cpp.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "transport/soft/codec/icrc.h"
#include "transport/soft/dpdk/arp_resolver.h"
#include "transport/soft/dpdk/device_spec.h"
#include "transport/soft/dpdk/dpdk_port.h"
#include "transport/soft/dpdk/ethdev_io.h"
#include "transport/soft/dpdk/frame.h"
#include "transport/soft/dpdk/memif_session.h"
#include "transport/soft/dpdk/tx_regions.h"

struct rte_device;
struct rte_mbuf;
struct rte_mempool;

namespace ibex::soft::dpdk {

inline constexpr uint32_t kHeaderRoom = 256; // header mbufs: Ethernet .. BTH/RETH and small pieces

class DpdkPort final : public Port {
public:
    // Takes the pools and the opened device; the ethdev is started.
    DpdkPort(const DeviceSpec &spec, const Opened &o, NetAddr local, rte_mempool *pool, rte_mempool *hdr_pool,
             rte_device *dma_device, uint8_t mtu, bool multi_seg, bool whole_frames);
    ~DpdkPort() override;

    NetAddr local() const override { return local_; }
    uint8_t max_mtu() const override { return mtu_; }
    int wait_fd() const override { return io_.wait_fd(); }
    uint64_t tx_dropped() const override { return stats_.tx_dropped; }
    // What the receive ring holds: the engine keeps in flight what fits (memif's ring is
    // the peer-shared one of 2^rsize slots, not rxd).
    size_t rx_buffer_bytes() const override;
    void memory_registered(const void *addr, size_t len) override { regions_->add(addr, len); }
    void memory_deregistered(const void *addr, size_t len) override;
    void peer_added(NetAddr peer) override;
    bool arm_wait() override { return io_.arm_wait(); }
    void wait_done() override { io_.wait_done(); }
    void send(std::span<const TxPacket> pkts) override;
    int recv(std::span<RxPacket> out) override;
    bool whole_frames() const override { return whole_frames_; }
    // Where the PMD copies every frame anyway (a vdev: memif, af_packet, af_xdp), a frame is
    // built by copying its payload in with the ICRC computed on the way: one read of each
    // payload byte here instead of two (the engine's ICRC, then the PMD's copy from the
    // registered region), one mbuf instead of three, and the PMD copies from a frame that
    // is still in cache. A NIC's DMA reads registered memory itself: the engine's ICRC and
    // zero copy are cheaper there.
    bool fills_icrc() const override { return !whole_frames_ && !dma_device_; }

    DpdkPortStats stats() const;
    // Whole-frame mode (the switch): answer ARP requests for these addresses with this
    // port's MAC, instead of requests for its own address.
    void proxy_arp(std::vector<uint32_t> ips) { arp_.answer_for(std::move(ips)); }
    // Whole-frame mode: up to n received RoCE frames as mbufs the caller then owns (and
    // frees), each described in pkts; the same as recv() but kept past the next call.
    uint16_t take_frames(rte_mbuf **frames, RxPacket *pkts, uint16_t n);

private:
    uint16_t take(rte_mbuf **frames, RxPacket *pkts, uint16_t want);
    bool handle_rx(rte_mbuf *m, RxPacket *out, uint16_t slot);
    rte_mbuf *forward(const TxPacket &p, const Mac *dst_mac);
    rte_mbuf *build(const TxPacket &p, const Mac &dst_mac);
    rte_mbuf *build_with_icrc(const TxPacket &p, const Mac &dst_mac);
    bool append_copy(rte_mbuf *head, rte_mbuf **tail, const void *p, uint32_t len);
    rte_mbuf *hdr_mbuf();
    void transmit(uint16_t n) { stats_.tx_dropped += io_.transmit(tx_, n); }
    void release_held();
    std::string name() const { return "port " + std::to_string(io_.port_id()); }

    DeviceSpec spec_;
    NetAddr local_;
    rte_mempool *pool_;
    rte_mempool *hdr_pool_;
    rte_device *dma_device_;
    std::unique_ptr<TxRegions> regions_;
    uint8_t mtu_;
    bool multi_seg_;
    bool whole_frames_;
    L2Options l2_;
    Mac mac_;
    DpdkPortStats stats_;
    EthdevIo io_;
    MemifSession session_;
    ArpResolver arp_;
    roce::IcrcPrefixCache tx_icrc_prefix_;

    rte_mbuf *tx_[kBurst];
    rte_mbuf *held_[kBurst];
    uint16_t held_count_ = 0;
    rte_mbuf *hdr_stash_[kBurst];
    uint16_t hdr_stash_pos_ = 0;
    uint16_t hdr_stash_count_ = 0;
    uint8_t linear_[kBurst][9216];
};

// open_dpdk_port() with the class kept.
std::unique_ptr<DpdkPort> open_dpdk_port_object(const DpdkPortOptions &opts, ibex_status_t *status);

} // namespace ibex::soft::dpdk
