// Raw memif between two processes, no ibex framing or engine: a source sends frames of
// one size as fast as the ring takes them for a fixed time, a sink counts what arrives.
// The sink's figure is the path's limit for that frame size (both copies memif makes
// included). EAL starts with ibex's own defaults (IBEX_DPDK_ARGS applies).
//
// Mode `roce` adds, per frame, the least any RoCEv2 endpoint must do on this path, and
// nothing else: one read and one write of each payload byte per side, the ICRC computed
// from the same loads (crc32_copy, as the port's receive path does). The source writes
// Ethernet/IPv4/UDP/BTH headers and copies the payload from a 64 KiB source region into
// the frame while computing the ICRC; the sink verifies the ICRC while copying the payload
// into a 64 KiB destination region (as an RDMA WRITE lands in a registered region). Its
// rate bounds a soft RoCE engine here, one engine's worth of protocol short.
//
// The source and the sink each run on one CPU of their own (by default the first and the
// last this process may use), as the port's two processes do when both are busy: left to
// the scheduler, the two spinning loops sometimes shared a core, and the rate moved 7x
// from run to run.
//
//   ibex_dpdk_raw sink   <socket> [seconds] [frame] [raw|roce] [cpu]   serves the socket, prints the rate
//   ibex_dpdk_raw source <socket> [seconds] [frame] [raw|roce] [cpu]   connects and sends
// Output (one line): role frames=N seconds=S mpps=X gbits=Y frame=B mode=M icrc_bad=K cpu=C
// (gbits counts whole frames; the sink's frame is the length it received; cpu -1: not pinned).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>
#include <sched.h>
#include <sys/uio.h>
#include <unistd.h>

#include <rte_bus_vdev.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>

#include "transport/soft/codec/crc32_wide.h"
#include "transport/soft/codec/icrc.h"
#include "transport/soft/codec/roce.h"
#include "transport/soft/dpdk/eal.h"
#include "transport/soft/dpdk/frame.h"

namespace {

constexpr uint16_t kBurst = 64;
constexpr size_t kL2L3 = 14 + 20 + 8; // Ethernet, IPv4, UDP
constexpr size_t kRegionBytes = 65536; // the source's and the sink's regions, reused as ibex_write_bw does
const ibex::soft::NetAddr kSrc{0x0afe0002u, ibex::roce::kUdpPort}, kDst{0x0afe0001u, ibex::roce::kUdpPort};

int usage() {
    std::fprintf(stderr, "usage: ibex_dpdk_raw sink|source <socket> [seconds] [frame bytes] [raw|roce] [cpu]\n");
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

// Walks a 64 KiB region a payload at a time, wrapping where the next would not fit.
struct RegionCursor {
    size_t off = 0;
    size_t next(size_t len) {
        if (off + len > kRegionBytes) off = 0;
        const size_t at = off;
        off += len;
        return at;
    }
};

// Source, roce mode: a WRITE MIDDLE of `frame` bytes, its payload copied from src with the
// ICRC computed on the way.
void make_roce_frame(uint8_t *d, uint32_t frame, uint32_t psn, const uint8_t *src, RegionCursor &cur) {
    using namespace ibex::roce;
    const uint32_t transport = frame - uint32_t(kL2L3); // BTH .. ICRC
    ibex::soft::dpdk::write_roce_headers(d, {}, {{2, 0, 0, 0, 0, 2}}, {{2, 0, 0, 0, 0, 1}}, kSrc, kDst, 2, transport);
    Bth b;
    b.opcode = kWriteMiddle;
    b.dest_qp = 0x11;
    b.psn = psn;
    uint8_t *bth = d + kL2L3;
    encode_bth(bth, b);
    const size_t covered = transport - kIcrcLen, payload = covered - kBthLen;
    const uint32_t crc = icrc_ipv4_begin(icrc_fields(), bth, kBthLen, covered);
    store_icrc(bth + covered, crc32_copy(crc, bth + kBthLen, src + cur.next(payload), payload));
}

// Sink, roce mode: true if the ICRC holds; the payload is in dest either way (the port's
// receive path places before it knows, see responder_placement()).
bool take_roce_frame(const uint8_t *d, uint32_t frame, uint8_t *dest, RegionCursor &cur) {
    using namespace ibex::roce;
    if (frame < kL2L3 + kBthLen + kIcrcLen) return false;
    const uint8_t *bth = d + kL2L3;
    const size_t covered = frame - kL2L3 - kIcrcLen, payload = covered - kBthLen;
    const uint32_t crc = icrc_ipv4_begin(icrc_fields(), bth, kBthLen, covered);
    return crc32_copy(crc, dest + cur.next(payload), bth + kBthLen, payload) == load_icrc(bth + covered);
}

// What each end does when its ring gives nothing (full for the source, empty for the
// sink): the port's sender yields the CPU on a full ring and its progress thread on an idle
// pass, and so does the harness. Spinning on the ring instead kept the ring's shared
// indices bouncing between the two cores, and the raw mode, whose source does nothing per
// frame, then ran slower than the roce mode.
void back_off() { sched_yield(); }

// The CPU a role runs on unless told: the first and the last this process may use, so the
// two ends never share one. -1 where only one is allowed.
int default_cpu(bool sink) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) != 0 || CPU_COUNT(&set) < 2) return -1;
    int first = -1, last = -1;
    for (int c = 0; c < CPU_SETSIZE; ++c)
        if (CPU_ISSET(c, &set)) {
            if (first < 0) first = c;
            last = c;
        }
    return sink ? last : first;
}

bool pin_to(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return sched_setaffinity(0, sizeof set, &set) == 0;
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
    const bool sink = role == "sink";
    const int cpu = argc > 6 ? std::atoi(argv[6]) : default_cpu(sink);
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
    // After EAL, which pins the thread that starts it and then gives it back its affinity.
    if (cpu >= 0 && !pin_to(cpu)) {
        std::fprintf(stderr, "ibex_dpdk_raw: cannot run on CPU %d\n", cpu);
        return 1;
    }
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
    std::vector<uint8_t> region(kRegionBytes); // the source's payload, the sink's destination
    for (size_t i = 0; i < region.size(); ++i) region[i] = uint8_t(i * 7 + 1);
    RegionCursor cursor;
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
                                 !take_roce_frame(rte_pktmbuf_mtod(m[i], const uint8_t *), m[i]->data_len, region.data(), cursor)))
                        ++icrc_bad;
                }
                rte_pktmbuf_free_bulk(m, n);
            } else if (started && now - last > std::chrono::milliseconds(500)) {
                break;
            } else {
                back_off(); // an empty ring
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
                    if (roce) make_roce_frame(rte_pktmbuf_mtod(b, uint8_t *), frame, psn++, region.data(), cursor);
                }
                ready = kBurst;
                next = 0;
            }
            const uint16_t sent = rte_eth_tx_burst(port, 0, m + next, uint16_t(ready - next));
            if (!sent) back_off(); // a full ring
            next = uint16_t(next + sent);
            frames += sent;
            bytes += uint64_t(sent) * frame;
            last_len = frame;
        }
        if (next < ready) rte_pktmbuf_free_bulk(m + next, ready - next);
        usleep(700000); // the sink notices the end
    }
    const double s = started ? std::chrono::duration<double>(last - start).count() : 0;
    std::printf("%s frames=%llu seconds=%.3f mpps=%.3f gbits=%.2f frame=%u mode=%s icrc_bad=%llu cpu=%d\n", role.c_str(),
                (unsigned long long)frames, s, s > 0 ? frames / s / 1e6 : 0.0, s > 0 ? double(bytes) * 8 / s / 1e9 : 0.0,
                last_len, mode.c_str(), (unsigned long long)icrc_bad, cpu);
    rte_eth_dev_stop(port);
    rte_eth_dev_close(port);
    rte_vdev_uninit("net_memif_raw");
    return 0;
}
