// A memif peer that is SIGKILLed cannot say it is leaving (memif_session.h), so DPDK
// 22.11's memif PMD tears the link down on EAL's interrupt thread and unmaps the shared
// regions while this side may be inside a burst on them. memif_unmap_guard.h makes that
// unmap wait until no burst runs. The survivor here busy-polls with all its threads on
// one CPU, so the interrupt thread runs only by preempting the poller, often mid-burst:
// without the guard the survivor died with SIGSEGV at the first or second kill (3 of 3
// runs).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <poll.h>
#include <sched.h>
#include <string>
#include <thread>
#include <unistd.h>

#include "tests/support/child_process.h"
#include "tests/support/threads.h"
#include "tests/transport/soft/dpdk/small_frame.h"
#include "transport/soft/dpdk/dpdk_port.h"
#include "transport/soft/dpdk/memif_unmap_guard.h"

#include <rte_ethdev.h>

using namespace ibex::soft;
using namespace ibex::soft::dpdk;
using namespace ibex::test;

namespace {

constexpr int kRounds = 12;
constexpr char kPeerUp = 'U';   // survivor -> test: a frame from the new peer arrived
constexpr char kPeerDown = 'D'; // survivor -> test: the link went down
constexpr char kStop = 'S';     // test -> survivor: report and exit

std::string socket_path() { return "/tmp/ibex-unmap-guard-" + std::to_string(getpid()) + ".sock"; }

std::string device(const std::string &sock, bool server) {
    return "dpdk:memif:" + sock +
           (server ? ",role=server,ip=10.62.0.1,mac=02:00:00:3e:00:01,neigh=10.62.0.2@02:00:00:3e:00:02"
                   : ",role=client,ip=10.62.0.2,mac=02:00:00:3e:00:02,neigh=10.62.0.1@02:00:00:3e:00:01");
}

// The survivor: a memif server that sends and receives without pause, reporting each
// peer's arrival and departure; exits 0 when told to stop, having seen `kRounds` peers.
int survivor(int fd, const std::string &sock) {
    ibex_status_t st;
    DpdkPortOptions o;
    o.device = device(sock, true);
    auto port = open_dpdk_port(o, &st);
    const char ready = !port ? 'F' : install_memif_unmap_guard() ? 'R' : 'G';
    if (!send_all(fd, &ready, 1) || ready != 'R') return 2;
    pin_all_threads(sched_getcpu());
    uint8_t bytes[64] = {};
    const TxPacket p = small_frame(bytes, 0x0a3e0002);
    RxPacket pkts[32];
    bool up = false;
    int peers = 0;
    for (uint64_t i = 0;; ++i) {
        const int n = port->recv(pkts);
        port->send(std::span<const TxPacket>(&p, 1));
        if ((i & 255) != 0) continue;
        rte_eth_link link{};
        rte_eth_link_get_nowait(0, &link);
        if (!up && n > 0) {
            up = true;
            ++peers;
            if (!send_all(fd, &kPeerUp, 1)) return 3;
        } else if (up && !link.link_status) {
            up = false;
            if (!send_all(fd, &kPeerDown, 1)) return 3;
        }
        pollfd pf{fd, POLLIN, 0};
        if (poll(&pf, 1, 0) > 0) {
            char c = 0;
            if (!recv_all(fd, &c, 1) || c != kStop) return 4;
            return peers == kRounds ? 0 : 5;
        }
    }
}

// A peer: a memif client that sends until it is killed.
int victim(int fd, const std::string &sock) {
    ibex_status_t st;
    DpdkPortOptions o;
    o.device = device(sock, false);
    auto port = open_dpdk_port(o, &st);
    char ready = port ? 'R' : 'F';
    if (!send_all(fd, &ready, 1) || !port) return 2;
    uint8_t bytes[64] = {};
    const TxPacket p = small_frame(bytes, 0x0a3e0001);
    RxPacket pkts[32];
    for (int i = 0; i < 20'000'000; ++i) {
        port->send(std::span<const TxPacket>(&p, 1));
        port->recv(pkts);
    }
    return 0;
}

bool expect_byte(int fd, char want, int timeout_ms) {
    char c = 0;
    return recv_all(fd, &c, 1, timeout_ms) && c == want;
}

} // namespace

// The test process itself never starts EAL, so each peer can be a fresh fork.
TEST(MemifUnmapGuard, PeersKilledMidTrafficLeaveTheSurvivorPolling) {
    const std::string sock = socket_path();
    ChildProcess keeper;
    ASSERT_TRUE(keeper.start([&](int fd) { return survivor(fd, sock); }, 50));
    char ready = 0;
    ASSERT_TRUE(recv_all(keeper.fd(), &ready, 1, 20000));
    ASSERT_NE(ready, 'F') << "the survivor could not open its port";
    ASSERT_EQ(ready, 'R') << "the guard is not installed (a DPDK without the memif PMD as a shared object?)";
    for (int round = 0; round < kRounds; ++round) {
        ChildProcess peer;
        ASSERT_TRUE(peer.start([&](int fd) { return victim(fd, sock); }, 30));
        ASSERT_TRUE(expect_byte(peer.fd(), 'R', 20000)) << "round " << round << ": the peer could not open its port";
        ASSERT_TRUE(expect_byte(keeper.fd(), kPeerUp, 10000)) << "round " << round << ": no frame from the peer";
        // Let the traffic run a little so the kill lands at a random point of a burst.
        std::this_thread::sleep_for(std::chrono::milliseconds(2 + round % 5));
        peer.kill_and_reap();
        ASSERT_TRUE(expect_byte(keeper.fd(), kPeerDown, 10000))
            << "round " << round << ": the survivor did not see the link go down (exit " << keeper.wait_exit(1000) << ")";
    }
    ASSERT_TRUE(send_all(keeper.fd(), &kStop, 1));
    EXPECT_EQ(keeper.wait_exit(10000), 0) << "256 + 11: the survivor died with SIGSEGV";
    unlink(sock.c_str());
}

// The wait itself: it returns only after a burst that was running on another thread ends,
// and does not wait for the calling thread's own burst.
void wait_covers_running_bursts() {
    std::atomic<bool> inside{false}, ended{false};
    std::thread poller([&] {
        MemifBurst burst(true);
        inside = true;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        ended = true;
    });
    while (!inside.load()) std::this_thread::yield();
    wait_out_running_bursts();
    EXPECT_TRUE(ended.load()) << "the wait returned while the burst still ran";
    poller.join();
    MemifBurst own(true);
    const auto t0 = std::chrono::steady_clock::now();
    wait_out_running_bursts();
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(kBurstWaitLimitNs / 2000000))
        << "the caller's own burst held the wait";
}

TEST(MemifUnmapGuard, UnmapWaitsForTheBurstThatWasRunning) {
    ASSERT_FALSE(burst_fence_is_remote());
    wait_covers_running_bursts(); // bursts fence themselves
    if (!use_remote_burst_fence()) GTEST_SKIP() << "no membarrier(PRIVATE_EXPEDITED) here: only the fallback was tested";
    ASSERT_TRUE(burst_fence_is_remote());
    wait_covers_running_bursts(); // the wait fences every thread
}

// Bursts on other ports (not memif) are not bracketed, and so never hold an unmap.
TEST(MemifUnmapGuard, OtherPortsTakeNoSlot) {
    std::atomic<bool> inside{false}, release{false};
    std::thread poller([&] {
        MemifBurst burst(false);
        inside = true;
        while (!release.load()) std::this_thread::yield();
    });
    while (!inside.load()) std::this_thread::yield();
    const auto t0 = std::chrono::steady_clock::now();
    wait_out_running_bursts();
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(kBurstWaitLimitNs / 2000000));
    release = true;
    poller.join();
}
