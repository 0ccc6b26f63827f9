// Raw memif between two processes, no ibex framing or engine: a source sends frames of
// one size as fast as the ring takes them for a fixed time, a sink counts what arrives.
// The sink's figure is the path's limit for that frame size (both copies memif makes
// included). EAL starts with ibex's own defaults (IBEX_DPDK_ARGS applies).
//
// Mode `roce` adds, per frame, the least any RoCEv2 endpoint must do on this path, and
// nothing else: the source writes Ethernet/IPv4/UDP/BTH headers and computes the ICRC over
// the frame (with ibex's CRC kernel); the sink verifies the ICRC and copies the payload
// into a 64 KiB destination buffer (as an RDMA WRITE lands in a registered region). Its
// rate is the ceiling for a soft RoCE engine here, one engine's worth of protocol short.
//
//   ibex_dpdk_raw sink   <socket> [seconds] [frame] [raw|roce]   serves the socket, prints the rate
//   ibex_dpdk_raw source <socket> [seconds] [frame] [raw|roce]   connects and sends
// Output (one line): role frames=N seconds=S mpps=X gbits=Y frame=B mode=M icrc_bad=K
// (gbits counts whole frames; the sink's frame is the length it received).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>
#include <sys/uio.h>
#include <unistd.h>

#include <rte_bus_vdev.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>

#include "transport/soft/codec/icrc.h"
#include "transport/soft/codec/roce.h"
#include "transport/soft/dpdk/eal.h"
#include "transport/soft/dpdk/frame.h"

namespace {

constexpr uint16_t kBurst = 64;
constexpr size_t kL2L3 = 14 + 20 + 8; // Ethernet, IPv4, UDP
constexpr size_t kDestBytes = 65536;   // the sink's destination region, reused as ibex_write_bw does
const ibex::soft::NetAddr kSrc{0x0afe0002u, ibex::roce::kUdpPort}, kDst{0x0afe0001u, ibex::roce::kUdpPort};

int usage() {
    std::fprintf(stderr, "usage: ibex_dpdk_raw sink|source <socket> [seconds] [frame bytes] [raw|roce]\n");
    return 2;
}

ibex::roce::IcrcIpv4Fields icrc_fields() {
    ibex::roce::IcrcIpv4Fields f;
    f.src_ip = kSrc.ip;
    f.dst_ip = kDst.ip;
    f.src_port = kSrc.port;
    f.dst_port = kDst.port;
    return f;
}

// Source, roce mode: headers (a WRITE MIDDLE) and ICRC of one frame of `frame` bytes.
void make_roce_frame(uint8_t *d, uint32_t frame, uint32_t psn) {
    using namespace ibex::roce;
    const uint32_t transport = frame - uint32_t(kL2L3); // BTH .. ICRC
    ibex::soft::dpdk::write_roce_headers(d, {}, {{2, 0, 0, 0, 0, 2}}, {{2, 0, 0, 0, 0, 1}}, kSrc, kDst, 2, transport);
    Bth b;
    b.opcode = kWriteMiddle;
    b.dest_qp = 0x11;
    b.psn = psn;
    encode_bth(d + kL2L3, b);
    const iovec whole{d + kL2L3, transport - kIcrcLen};
    store_icrc(d + frame - kIcrcLen, icrc_ipv4(icrc_fields(), std::span<const iovec>(&whole, 1), whole.iov_len));
}

// Sink, roce mode: true if the ICRC holds, and then the payload is in dest.
bool take_roce_frame(const uint8_t *d, uint32_t frame, uint8_t *dest, size_t *dest_off) {
    using namespace ibex::roce;
    if (frame < kL2L3 + kBthLen + kIcrcLen) return false;
    const size_t transport = frame - kL2L3 - kIcrcLen;
    const iovec whole{const_cast<uint8_t *>(d + kL2L3), transport};
    if (icrc_ipv4(icrc_fields(), std::span<const iovec>(&whole, 1), transport) != load_icrc(d + frame - kIcrcLen))
        return false;
    const size_t payload = transport - kBthLen;
    if (*dest_off + payload > kDestBytes) *dest_off = 0;
    std::memcpy(dest + *dest_off, d + kL2L3 + kBthLen, payload);
    *dest_off += payload;
    return true;
}

} // namespace

int main(int argc, char **argv) {
    if (argc < 3) return usage();
    const std::string role = argv[1];
    if (role != "sink" && role != "source") return usage();
    const std::string sock = argv[2];
    const double seconds = argc > 3 ? std::atof(argv[3]) : 5.0;
    const uint32_t frame = argc > 4 ? uint32_t(std::atoi(argv[4])) : 4154;
    const std::string mode = argc > 5 ? argv[5] : "raw";
    if (mode != "raw" && mode != "roce") return usage();
    const bool roce = mode == "roce";
    if (roce && frame < kL2L3 + ibex::roce::kBthLen + ibex::roce::kIcrcLen) return usage();
    if (ibex::soft::dpdk::ensure_eal() != IBEX_OK) {
        std::fprintf(stderr, "ibex_dpdk_raw: EAL did not start\n");
        return 1;
    }
    // ibex starts EAL on a thread of its own, so this one is no lcore yet: without that the
    // mempool has no per-thread cache, allocation cycles through all of the pool's mbufs,
    // and the copy into the ring reads them from DRAM (the harness measured itself, at
    // less than half of what the port moves). The port registers its threads the same way.
    if (rte_lcore_id() == LCORE_ID_ANY && rte_thread_register() != 0) {
        std::fprintf(stderr, "ibex_dpdk_raw: cannot register this thread with EAL\n");
        return 1;
    }
    const bool sink = role == "sink";
    if (sink) unlink(sock.c_str());
    const std::string args = std::string("role=") + (sink ? "server" : "client") + ",socket=" + sock +
                             ",socket-abstract=no,bsize=" + std::to_string(frame < 1024 ? 1024 : (frame + 511) / 512 * 512) +
                             ",rsize=11";
    if (rte_vdev_init("net_memif_raw", args.c_str()) != 0) {
        std::fprintf(stderr, "ibex_dpdk_raw: cannot create memif (%s)\n", args.c_str());
        return 1;
    }
    uint16_t port = 0;
    rte_eth_dev_get_port_by_name("net_memif_raw", &port);
    rte_mempool *pool = rte_pktmbuf_pool_create("raw", 8192, 256, 0, uint16_t(RTE_PKTMBUF_HEADROOM + frame + 64), 0);
    rte_eth_conf conf{};
    if (!pool || rte_eth_dev_configure(port, 1, 1, &conf) != 0 || rte_eth_rx_queue_setup(port, 0, 2048, 0, nullptr, pool) != 0 ||
        rte_eth_tx_queue_setup(port, 0, 2048, 0, nullptr) != 0 || rte_eth_dev_start(port) != 0) {
        std::fprintf(stderr, "ibex_dpdk_raw: cannot start the memif port\n");
        return 1;
    }
    // Both sides wait for the link (bounded), then run for `seconds` from the first frame.
    rte_eth_link link{};
    for (int i = 0; i < 30000 && !link.link_status; ++i) {
        rte_eth_link_get_nowait(port, &link);
        if (!link.link_status) usleep(1000);
    }
    if (!link.link_status) {
        std::fprintf(stderr, "ibex_dpdk_raw: no peer on %s\n", sock.c_str());
        return 1;
    }
    using Clock = std::chrono::steady_clock;
    uint64_t frames = 0, bytes = 0, icrc_bad = 0;
    uint32_t psn = 0, last_len = 0;
    std::vector<uint8_t> dest(kDestBytes);
    size_t dest_off = 0;
    rte_mbuf *m[kBurst];
    Clock::time_point start{}, last{};
    bool started = false;
    const auto give_up = Clock::now() + std::chrono::duration<double>(seconds + 30);
    if (sink) {
        // Ends when frames stop coming for 0.5 s after the source's run.
        while (Clock::now() < give_up) {
            const uint16_t n = rte_eth_rx_burst(port, 0, m, kBurst);
            const auto now = Clock::now();
            if (n) {
                if (!started) start = now, started = true;
                last = now;
                frames += n;
                for (uint16_t i = 0; i < n; ++i) {
                    last_len = m[i]->pkt_len;
                    bytes += last_len;
                    // memif hands a frame longer than its buffer size over in segments.
                    if (roce && (m[i]->nb_segs != 1 ||
                                 !take_roce_frame(rte_pktmbuf_mtod(m[i], const uint8_t *), m[i]->data_len, dest.data(), &dest_off)))
                        ++icrc_bad;
                }
                rte_pktmbuf_free_bulk(m, n);
            } else if (started && now - last > std::chrono::milliseconds(500)) {
                break;
            }
        }
    } else {
        start = Clock::now();
        started = true;
        const auto end = start + std::chrono::duration<double>(seconds);
        // Frames the ring did not take are offered again, not rebuilt: a sender does each
        // frame's work once (building frames only to drop them would spend the CPU the
        // path is measured by).
        uint16_t ready = 0, next = 0;
        while ((last = Clock::now()) < end) {
            if (next == ready) {
                if (rte_pktmbuf_alloc_bulk(pool, m, kBurst) != 0) continue;
                for (auto *b : m) {
                    b->data_len = uint16_t(frame), b->pkt_len = frame;
                    if (roce) make_roce_frame(rte_pktmbuf_mtod(b, uint8_t *), frame, psn++);
                }
                ready = kBurst;
                next = 0;
            }
            const uint16_t sent = rte_eth_tx_burst(port, 0, m + next, uint16_t(ready - next));
            next = uint16_t(next + sent);
            frames += sent;
            bytes += uint64_t(sent) * frame;
            last_len = frame;
        }
        if (next < ready) rte_pktmbuf_free_bulk(m + next, ready - next);
        usleep(700000); // the sink notices the end
    }
    const double s = started ? std::chrono::duration<double>(last - start).count() : 0;
    std::printf("%s frames=%llu seconds=%.3f mpps=%.3f gbits=%.2f frame=%u mode=%s icrc_bad=%llu\n", role.c_str(),
                (unsigned long long)frames, s, s > 0 ? frames / s / 1e6 : 0.0, s > 0 ? double(bytes) * 8 / s / 1e9 : 0.0,
                last_len, mode.c_str(), (unsigned long long)icrc_bad);
    rte_eth_dev_stop(port);
    rte_eth_dev_close(port);
    rte_vdev_uninit("net_memif_raw");
    return 0;
}
