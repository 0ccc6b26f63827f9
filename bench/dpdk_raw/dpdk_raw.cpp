// Raw memif between two processes, no ibex framing or engine: a source sends frames of
// one size as fast as the ring takes them for a fixed time, a sink counts what arrives.
// The sink's figure is the path's limit for that frame size (both copies memif makes
// included). EAL starts with ibex's own defaults (IBEX_DPDK_ARGS applies).
//
//   ibex_dpdk_raw sink   <socket> [seconds]            serves the socket, prints the rate
//   ibex_dpdk_raw source <socket> [seconds] [frame]    connects and sends
// Output (one line): role frames=N seconds=S mpps=X gbits=Y frame=B
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unistd.h>

#include <rte_bus_vdev.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>

#include "transport/soft/dpdk/eal.h"

namespace {

constexpr uint16_t kBurst = 64;

int usage() {
    std::fprintf(stderr, "usage: ibex_dpdk_raw sink|source <socket> [seconds] [frame bytes]\n");
    return 2;
}

} // namespace

int main(int argc, char **argv) {
    if (argc < 3) return usage();
    const std::string role = argv[1];
    if (role != "sink" && role != "source") return usage();
    const std::string sock = argv[2];
    const double seconds = argc > 3 ? std::atof(argv[3]) : 5.0;
    const uint32_t frame = argc > 4 ? uint32_t(std::atoi(argv[4])) : 4150;
    if (ibex::soft::dpdk::ensure_eal() != IBEX_OK) {
        std::fprintf(stderr, "ibex_dpdk_raw: EAL did not start\n");
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
    uint64_t frames = 0;
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
                rte_pktmbuf_free_bulk(m, n);
            } else if (started && now - last > std::chrono::milliseconds(500)) {
                break;
            }
        }
    } else {
        start = Clock::now();
        started = true;
        const auto end = start + std::chrono::duration<double>(seconds);
        while ((last = Clock::now()) < end) {
            if (rte_pktmbuf_alloc_bulk(pool, m, kBurst) != 0) continue;
            for (auto *b : m) b->data_len = uint16_t(frame), b->pkt_len = frame;
            const uint16_t sent = rte_eth_tx_burst(port, 0, m, kBurst);
            frames += sent;
            if (sent < kBurst) rte_pktmbuf_free_bulk(m + sent, kBurst - sent);
        }
        usleep(700000); // the sink notices the end
    }
    const double s = started ? std::chrono::duration<double>(last - start).count() : 0;
    std::printf("%s frames=%llu seconds=%.3f mpps=%.3f gbits=%.2f frame=%u\n", role.c_str(), (unsigned long long)frames, s,
                s > 0 ? frames / s / 1e6 : 0.0, s > 0 ? frames * double(frame) * 8 / s / 1e9 : 0.0, frame);
    rte_eth_dev_stop(port);
    rte_eth_dev_close(port);
    rte_vdev_uninit("net_memif_raw");
    return 0;
}
