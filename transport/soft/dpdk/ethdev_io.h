// Queue 0 of an attached ethdev as a dpdk port drives it: receive bursts (kept in a small
// stash, so a look before blocking loses nothing), transmit bursts with a bounded wait on a
// full ring, the link state, what the progress thread blocks on (the PMD's rx interrupt,
// else a timer), and closing the device.
#pragma once

#include <cstdint>
#include <ctime>

#include "transport/soft/dpdk/ethdev_attach.h"
#include "transport/soft/dpdk/memif_unmap_guard.h"

struct rte_mbuf;

namespace ibex::soft::dpdk {

inline constexpr uint16_t kBurst = 64;

// The clock the port's bounds (transmit wait, ARP, the leave handshake) are measured on.
inline uint64_t now_ns() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

bool link_is_up(uint16_t port_id);

// Waits (bounded) for the link of a port that is not a memif server; true once it is up.
// A memif client whose server refused it (ethdev_io.cpp) reconnects meanwhile.
inline constexpr int kMemifLinkWaitMs = 5000; // a memif client: its server may still be starting
bool wait_for_link(uint16_t port_id, bool memif_client, uint32_t *reconnects = nullptr);

// Makes the calling thread an EAL lcore on its first call (why: ethdev_io.cpp). Called
// once per burst by each entry point that may run on a new thread.
void ensure_lcore();

class EthdevIo {
public:
    // sleep_us: the longest sleep of a port without rx interrupts. tx_wait_ns: how long a
    // full transmit ring is retried before the frames are dropped.
    EthdevIo(const Opened &opened, uint32_t sleep_us, uint64_t tx_wait_ns);
    ~EthdevIo() { close(); }
    EthdevIo(const EthdevIo &) = delete;
    EthdevIo &operator=(const EthdevIo &) = delete;

    uint16_t port_id() const { return opened_.port_id; }
    const Opened &opened() const { return opened_; }
    bool link_up() const { return link_is_up(opened_.port_id); }

    // One burst on queue 0; on a memif link bracketed so that its disconnect waits for it
    // (memif_unmap_guard.h).
    uint16_t rx_burst(rte_mbuf **frames, uint16_t n);
    uint16_t tx_burst(rte_mbuf **frames, uint16_t n);

    // The next received frame, bursting up to `want` when the stash is empty; nullptr: none.
    rte_mbuf *next_rx(uint16_t want);
    // Sends the frames; what the ring does not take within the wait (or at once when the
    // link is down: no peer, the wire drops) is freed. Returns how many were dropped.
    uint16_t transmit(rte_mbuf **frames, uint16_t n);

    int wait_fd() const { return intr_fd_ >= 0 ? intr_fd_ : timer_fd_; }
    bool rx_interrupts() const { return intr_fd_ >= 0; }
    // The progress thread is about to block on wait_fd(): false if frames already wait.
    bool arm_wait();
    void wait_done();

    // Frees the stash and closes the device on EAL's interrupt thread (where memif handles
    // its peer's disconnect: 22.11 can crash when both disconnect the same device at once);
    // a memif server chosen by lock removes its socket and lock file. Once only.
    void close();

private:
    void setup_wait();

    Opened opened_;
    bool memif_;
    uint32_t sleep_us_;
    uint64_t tx_wait_ns_;
    int intr_fd_ = -1;
    int timer_fd_ = -1;
    bool closed_ = false;
    rte_mbuf *stash_[kBurst];
    uint16_t stash_pos_ = 0;
    uint16_t stash_count_ = 0;
};

} // namespace ibex::soft::dpdk
