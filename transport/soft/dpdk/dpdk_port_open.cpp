// Opening a dpdk port: the device name and environment, EAL, the ethdev, its address and
// MTU, the mbuf pools, and the link.
#include "transport/soft/dpdk/dpdk_port_internal.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <unistd.h>

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
#include "transport/soft/dpdk/eal.h"

namespace ibex::soft {
namespace dpdk {
namespace {

constexpr int kDefaultMtu = 4200; // IP MTU that carries the 4096-byte RoCE MTU
// libxdp's default AF_XDP ring (XSK_RING_{PROD,CONS}__DEFAULT_NUM_DESCS), which DPDK's
// af_xdp PMD sizes its fill and completion rings by.
constexpr unsigned kXskDefaultRing = 2048;

} // namespace
} // namespace dpdk

bool dpdk_port_stats(const Port &port, DpdkPortStats *out) {
    const auto *p = dynamic_cast<const dpdk::DpdkPort *>(&port);
    if (!p) return false;
    *out = p->stats();
    return true;
}

std::unique_ptr<Port> open_dpdk_port(const DpdkPortOptions &opts, ibex_status_t *status) {
    return dpdk::open_dpdk_port_object(opts, status);
}

namespace dpdk {

std::unique_ptr<DpdkPort> open_dpdk_port_object(const DpdkPortOptions &opts, ibex_status_t *status) {
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
    auto give_up = [&](ibex_status_t st) -> std::unique_ptr<DpdkPort> {
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
    // XDP takes a frame of at most one page (ibex's program, like the PMD's own, is not a
    // multi-buffer one): above that MTU the kernel refuses to attach it, which the PMD
    // reports only as "Invalid argument" when the port starts.
    if (spec.target == Target::kAfXdp && o.netdev_mtu && info.max_mtu && o.netdev_mtu > info.max_mtu)
        return give_up(fail(IBEX_ERR_NOT_SUPPORTED,
                            "%s: %s has MTU %d, above the %u that XDP takes on it (a frame must fit a page): lower "
                            "its MTU or use dpdk:af_packet:%s",
                            opts.device.c_str(), spec.name.c_str(), o.netdev_mtu, unsigned(info.max_mtu),
                            spec.name.c_str()));
    // The MTU: the netdev's for af_packet/af_xdp (the kernel side must carry the frames),
    // else what a 4 KiB RoCE MTU needs (IBEX_DPDK_MTU) within what the PMD allows.
    int mtu = o.netdev_mtu ? o.netdev_mtu : static_cast<int>(config::get_int("IBEX_DPDK_MTU", kDefaultMtu, 1280, 65535));
    // The MTU ethdev is told: within what the PMD advertises. memif and af_packet
    // advertise a plain Ethernet frame (1518) yet carry any frame their buffer chains or
    // ring frames hold (af_packet's frames are sized to the netdev MTU, and its mbufs to a
    // whole frame), so for them the larger MTU stays ibex's own: at MTU 9000 af_packet
    // used to carry RoCE at 1024 bytes.
    int dev_mtu = mtu;
    if (info.max_mtu && dev_mtu > info.max_mtu) dev_mtu = info.max_mtu;
    if (info.max_rx_pktlen > RTE_ETHER_HDR_LEN + RTE_ETHER_CRC_LEN &&
        dev_mtu > int(info.max_rx_pktlen - RTE_ETHER_HDR_LEN - RTE_ETHER_CRC_LEN))
        dev_mtu = int(info.max_rx_pktlen - RTE_ETHER_HDR_LEN - RTE_ETHER_CRC_LEN);
    if (spec.target != Target::kMemif && spec.target != Target::kAfPacket) mtu = dev_mtu;
    const bool multi_seg = (info.tx_offload_capa & RTE_ETH_TX_OFFLOAD_MULTI_SEGS) != 0;

    const std::string pname = "ibex" + std::to_string(getpid()) + "_" + std::to_string(o.port_id);
    uint32_t room = RTE_PKTMBUF_HEADROOM + static_cast<uint32_t>(mtu) + 64;
    if (spec.target == Target::kAfPacket) room = RTE_PKTMBUF_HEADROOM + af_packet_frame(o.netdev_mtu);
    // af_xdp makes its UMEM of the pool's mbufs, one chunk each. The kernel refuses chunks
    // under 2 KiB ("Failed to create umem" at MTU 1500), and a veth's XDP delivers nothing
    // into chunks much above the MTU yet short of room for its own headroom and tailroom
    // (MTU 1500 and 2000 opened and then lost every frame), nor chunks over a page (the
    // mempool adds its own header to each mbuf). The room an MTU of 3000 gets works for
    // every MTU up to it, the most XDP on veth allows.
    if (spec.target == Target::kAfXdp) room = std::max<uint32_t>(room, RTE_PKTMBUF_HEADROOM + 3000 + 64);
    // Receive ring + transmit ring + frames awaiting ARP, with room for the per-lcore caches.
    const unsigned ours = spec.rxd + spec.txd + unsigned(ArpResolver::kUnresolvedMax) + 4 * kBurst;
    unsigned nmbufs = ours;
    // af_xdp's UMEM is this pool, and the PMD parks mbufs in two kernel rings besides ours:
    // its fill ring (twice the library's default ring of 2048, topped up whenever half of
    // it is free) and its completion ring (2048, reclaimed only inside a transmit burst).
    // Without room for both, a sender whose window is full (so no transmit burst runs)
    // holds its whole pool in completions, cannot refill the fill ring, and so never
    // receives the ACKs that would open its window: across a bridge at MTU 3000 about
    // half of the 3-second ibex_write_bw runs ended in RETRY_EXC_ERR, and all of them with
    // txd=256 (bench/cross_host/udp_vs_tcp.sh).
    if (spec.target == Target::kAfXdp) nmbufs += 3 * kXskDefaultRing;
    rte_mempool *pool = rte_pktmbuf_pool_create(("p" + pname).c_str(), nmbufs, 128, 0, static_cast<uint16_t>(room),
                                                static_cast<int>(rte_socket_id()));
    // Header mbufs travel only through our own rings (the PMD copies a chained frame into
    // a UMEM frame of `pool`), so the af_xdp rings' share above is not tripled here.
    rte_mempool *hdr_pool = rte_pktmbuf_pool_create(("h" + pname).c_str(), 3 * ours, 128, 0,
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
    // A started device is closed on EAL's interrupt thread, where memif runs its control
    // channel; the failure is recorded first (the close may overwrite errno).
    auto fail_started = [&](ibex_status_t st) {
        run_on_interrupt_thread(&close_device, new Opened(o));
        o.vdev_name.clear();
        return fail_pools(st);
    };
    if (!o.server_bind_path.empty() && rename(o.server_bind_path.c_str(), o.server_socket.c_str()) != 0)
        return fail_started(fail_errno(IBEX_ERR_SYSTEM, errno, "%s: cannot name the memif socket %s (it listened as %s)",
                                       opts.device.c_str(), o.server_socket.c_str(), o.server_bind_path.c_str()));

    // A client's link comes up once the server answers; wait for it (bounded) so the first
    // packets are not lost. A server waits for no one.
    const bool memif_client = spec.target == Target::kMemif && !o.memif_server;
    if (!o.memif_server && !wait_for_link(o.port_id, memif_client, &o.memif_reconnects) && memif_client) {
        // Nothing would ever arrive: say so now rather than as a retry timeout later.
        return fail_started(
            fail(IBEX_ERR_REMOTE, "%s: the memif server on %s did not accept this client within %d ms (a memif socket "
                 "joins exactly two ports: one socket per pair of ranks, or ibex_switch for more)",
                 opts.device.c_str(), o.memif_socket.c_str(), kMemifLinkWaitMs));
    }

    // A bus device (a NIC) DMAs from the payload pages, which must be registered and mapped.
    rte_device *dma_dev = nullptr;
    if (info.device && std::strcmp(rte_bus_name(rte_dev_bus(info.device)), "vdev") != 0) dma_dev = info.device;
    uint8_t ib_mtu = roce::mtu_enum_for_netdev(mtu);
    if (!ib_mtu) ib_mtu = IBEX_MTU_256;
    NetAddr local{ip, opts.port ? opts.port : roce::kUdpPort};
    auto port = std::make_unique<DpdkPort>(spec, o, local, pool, hdr_pool, dma_dev, ib_mtu, multi_seg, opts.whole_frames);
    IBEX_LOG(info, "dpdk port %s: ethdev %u (%s%s) %s mtu %d (IB %d), tx %s", opts.device.c_str(), o.port_id,
             info.driver_name, spec.target == Target::kMemif ? (o.memif_server ? ", memif server" : ", memif client") : "",
             format_ipv4(ip).c_str(), mtu, roce::mtu_bytes(ib_mtu), multi_seg ? "zero-copy (chained extbuf)" : "by copy");
    *status = IBEX_OK;
    return port;
}

} // namespace dpdk
} // namespace ibex::soft
