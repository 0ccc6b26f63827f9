#include "transport/soft/dpdk/ethdev_io.h"

#include <cstdint>
#include <fcntl.h>
#include <sched.h>
#include <string>
#include <sys/timerfd.h>
#include <unistd.h>

#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>

#include "runtime/base/config.h"
#include "runtime/base/log.h"
#include "transport/soft/dpdk/eal.h"

namespace ibex::soft::dpdk {
namespace {

constexpr int kLinkWaitMs = 2000; // any port that is neither a memif server nor a client

// Mempools keep a per-lcore cache, a LIFO of recently freed mbufs; a thread that is no EAL
// lcore (the engine's progress thread, other application threads) has none and takes
// every mbuf from the shared ring, which is FIFO: the mbuf memif receives into next is the
// one freed longest ago, out of cache (measured: the receive copy took 4x as long). So
// each thread that drives the port becomes an lcore on first use, and gives the id back
// when it ends. Without a free lcore id it runs on uncached, as before.
struct LcoreRegistration {
    bool registered = false;
    LcoreRegistration() {
        if (rte_lcore_id() != LCORE_ID_ANY) return; // EAL's own thread, or registered already
        registered = rte_thread_register() == 0 && rte_lcore_id() != LCORE_ID_ANY;
    }
    ~LcoreRegistration() {
        if (registered) rte_thread_unregister();
    }
    LcoreRegistration(const LcoreRegistration &) = delete;
    LcoreRegistration &operator=(const LcoreRegistration &) = delete;
};

void register_this_thread() { thread_local LcoreRegistration reg; }

void stop_device(void *p) { rte_eth_dev_stop(static_cast<uint16_t>(reinterpret_cast<uintptr_t>(p))); }
void start_device(void *p) { rte_eth_dev_start(static_cast<uint16_t>(reinterpret_cast<uintptr_t>(p))); }

} // namespace

void ensure_lcore() {
    // Once registered, rte_lcore_id() answers and the thread_local is not looked up again.
    if (rte_lcore_id() == LCORE_ID_ANY) [[unlikely]]
        register_this_thread();
}

bool link_is_up(uint16_t port_id) {
    rte_eth_link link{};
    return rte_eth_link_get_nowait(port_id, &link) == 0 && link.link_status;
}

// A memif client may have connected between the server's probe, which creates the socket,
// and its start: 22.11's server then refuses the client ("ID not found") and the client
// never tries again. ibex's own servers name their socket only once started
// (ethdev_attach.cpp), so this is for other servers: a memif client whose link stays down
// reconnects, at growing intervals from 1 s. Not sooner: a restart that meets a handshake
// still under way (a slow one, on a loaded host) can make 22.11's server panic ("Error
// adding fd ... epoll_ctl, Bad file descriptor", after its sendmsg to the old socket fails).
bool wait_for_link(uint16_t port_id, bool memif_client, uint32_t *reconnects) {
    const int total = memif_client ? kMemifLinkWaitMs : kLinkWaitMs;
    int waited = 0;
    const int first = static_cast<int>(config::get_int("IBEX_DPDK_MEMIF_RETRY_MS", 1000, 1, kMemifLinkWaitMs));
    for (int interval = first; waited < total; interval *= 2) {
        for (int i = 0; i < interval && waited < total; ++i, ++waited) {
            if (link_is_up(port_id)) return true;
            usleep(1000);
        }
        if (!memif_client || waited >= total || link_is_up(port_id)) continue;
        IBEX_LOG(debug, "dpdk port %u: memif link still down after %d ms: reconnecting", port_id, waited);
        // Stop and start on EAL's interrupt thread, where memif runs its control channel,
        // as two requests. That thread handles a batch of ready descriptors at a time and
        // finds each one's handler by its number: a stop closes the control socket, a
        // start in the same request opened the next one under the same number, and a
        // readiness left in the batch from the old socket then ran the new socket's
        // handler, whose blocking receive waited for a server that only this thread could
        // run (seen: the thread stuck in recvmsg on the new socket, the server's listener
        // holding the unaccepted connection, every later request timing out).
        void *port = reinterpret_cast<void *>(uintptr_t(port_id));
        if (run_on_interrupt_thread(&stop_device, port)) run_on_interrupt_thread(&start_device, port);
        if (reconnects) ++*reconnects;
    }
    return link_is_up(port_id);
}

EthdevIo::EthdevIo(const Opened &opened, uint32_t sleep_us, uint64_t tx_wait_ns)
    : opened_(opened), memif_(!opened.memif_socket.empty()), sleep_us_(sleep_us), tx_wait_ns_(tx_wait_ns) {
    setup_wait();
    // The server may write into its ring towards a client only the slots the client has
    // handed back, and a client hands them back at the end of a receive burst: until its
    // first one the server has no room, and what it sends waits out the full-ring bound
    // and is dropped (RC resends it all). So a client receives once now; the server
    // cannot have sent anything yet, and whatever came is kept in the stash.
    if (memif_ && !opened_.memif_server) stash_count_ = rx_burst(stash_, kBurst);
}

void EthdevIo::setup_wait() {
    // rx interrupts where the PMD has them (the fd is an eventfd it or its peer kicks).
    int fd = -1;
    if (rte_eth_dev_rx_intr_enable(opened_.port_id, 0) == 0) {
        rte_eth_dev_rx_intr_disable(opened_.port_id, 0);
        fd = rte_eth_dev_rx_intr_ctl_q_get_fd(opened_.port_id, 0);
    }
    if (fd >= 0) {
        intr_fd_ = fd;
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    }
    if (intr_fd_ < 0) timer_fd_ = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    IBEX_LOG(info, "dpdk port %u: %s", opened_.port_id,
             intr_fd_ >= 0 ? "rx interrupts" : ("no rx interrupts: sleeps at most " + std::to_string(sleep_us_) + " us").c_str());
}

uint16_t EthdevIo::rx_burst(rte_mbuf **frames, uint16_t n) {
    MemifBurst burst(memif_);
    return rte_eth_rx_burst(opened_.port_id, 0, frames, n);
}

uint16_t EthdevIo::tx_burst(rte_mbuf **frames, uint16_t n) {
    MemifBurst burst(memif_);
    return rte_eth_tx_burst(opened_.port_id, 0, frames, n);
}

rte_mbuf *EthdevIo::next_rx(uint16_t want) {
    if (stash_pos_ == stash_count_) {
        stash_pos_ = 0;
        stash_count_ = rx_burst(stash_, want < kBurst ? want : kBurst);
        if (!stash_count_) return nullptr;
    }
    return stash_[stash_pos_++];
}

uint16_t EthdevIo::transmit(rte_mbuf **frames, uint16_t n) {
    uint16_t done = 0;
    uint64_t give_up = 0;
    for (uint32_t attempt = 0; done < n; ++attempt) {
        const uint16_t r = tx_burst(frames + done, static_cast<uint16_t>(n - done));
        done = static_cast<uint16_t>(done + r);
        if (!r && !link_up()) break; // no peer (a memif server alone): the wire drops
        // The ring is full: the peer drains it when it next polls; on a shared core
        // it needs the CPU to do so. Past the bound the wire drops, and RC resends.
        if (done < n && !r) {
            if ((attempt & 15) == 0) {
                const uint64_t now = now_ns();
                if (!give_up) give_up = now + tx_wait_ns_;
                else if (now > give_up) break;
            }
            sched_yield();
        }
    }
    if (done < n) rte_pktmbuf_free_bulk(frames + done, n - done);
    return static_cast<uint16_t>(n - done);
}

bool EthdevIo::arm_wait() {
    if (intr_fd_ >= 0) {
        rte_eth_dev_rx_intr_enable(opened_.port_id, 0);
        // A frame that arrived before the interrupt was enabled raises none: look once.
        if (stash_pos_ == stash_count_) {
            stash_pos_ = 0;
            stash_count_ = rx_burst(stash_, kBurst);
        }
        if (stash_count_ > stash_pos_) {
            rte_eth_dev_rx_intr_disable(opened_.port_id, 0);
            return false;
        }
        return true;
    }
    itimerspec t{};
    t.it_value.tv_sec = sleep_us_ / 1000000;
    t.it_value.tv_nsec = long(sleep_us_ % 1000000) * 1000;
    timerfd_settime(timer_fd_, 0, &t, nullptr);
    return true;
}

void EthdevIo::wait_done() {
    uint64_t v;
    if (intr_fd_ >= 0) {
        rte_eth_dev_rx_intr_disable(opened_.port_id, 0);
        [[maybe_unused]] ssize_t r = read(intr_fd_, &v, sizeof v);
    } else {
        [[maybe_unused]] ssize_t r = read(timer_fd_, &v, sizeof v);
    }
}

void EthdevIo::close() {
    if (closed_) return;
    closed_ = true;
    for (uint16_t i = stash_pos_; i < stash_count_; ++i) rte_pktmbuf_free(stash_[i]);
    stash_pos_ = stash_count_ = 0;
    // (The request owns its copy of what it needs: on a timeout it may still run later.)
    run_on_interrupt_thread(&close_device, new Opened(opened_));
    if (timer_fd_ >= 0) ::close(timer_fd_);
    if (opened_.lock_fd >= 0) {
        // The server chosen by lock tidies up (a client never holds the lock).
        unlink(opened_.server_socket.c_str());
        unlink(opened_.lock_path.c_str());
        ::close(opened_.lock_fd);
    }
}

} // namespace ibex::soft::dpdk
