// One memif connection's life as a dpdk port sees it, around the race README.md describes
// ("Closing a memif port while its peer polls"): the leave handshake (a closing port says
// "leaving" and waits for "stopped"; a port whose peer leaves answers and then leaves its
// rings alone until leave_gate.h opens again), and the prefault of the memif regions once
// the link is up (prefault.h), again after each peer, since a new peer brings new regions.
// Every port on a memif has one (the engine's dpdk port and ibex_switch's memif ports);
// on any other ethdev it does nothing.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "transport/soft/dpdk/frame.h"
#include "transport/soft/dpdk/leave_gate.h"

struct rte_mempool;

namespace ibex::soft::dpdk {

// One leave frame from an mbuf of `pool` on queue 0 of `port_id`; false when the ring had
// no room (memif hands a sender slots only as its peer receives) or the pool was empty.
bool send_leave(uint16_t port_id, rte_mempool *pool, LeaveOp op, const Mac &src_mac);

class MemifSession {
public:
    // memif: false for any other ethdev (the session then never closes the port).
    // leave_pool: where leave frames come from. name: for logs.
    MemifSession(bool memif, uint16_t port_id, bool memif_server, rte_mempool *leave_pool, const Mac &mac,
                 std::string name);

    // True while bursts must leave the port alone (its peer said it is leaving).
    bool quiet() { return !gate_.open() && still_quiet(); }
    // False from a peer's "leaving" until quiet() ends: no further burst in this pass.
    bool open() const { return gate_.open(); }
    // Before receiving: the rings of a link that came up are prefaulted once.
    void warm() {
        if (!warm_) [[unlikely]]
            warm_rings();
    }
    // A received "leaving": answers "stopped" (retried by quiet() while the ring has no
    // room and the leaver still waits) and closes the gate.
    void peer_leaving();
    // Closing the port: tells a connected peer, and waits (bounded) until it has stopped
    // polling or is gone; only then may the disconnect unmap its rings. Whose peer is
    // leaving itself waits (bounded) for it to go.
    void leave();
    uint64_t peer_leaves() const { return peer_leaves_; }

private:
    bool still_quiet();
    void warm_rings();
    bool old_rings_gone() const;
    // Watches the link, touching no ring, until it is down or the leaver's wait is over.
    void wait_until_peer_gone() const;
    bool send(LeaveOp op) { return send_leave(port_id_, pool_, op, mac_); }

    bool memif_;
    uint16_t port_id_;
    bool memif_server_;
    rte_mempool *pool_;
    Mac mac_;
    std::string name_;
    LeaveGate gate_;
    bool warm_;                         // false: a memif link whose rings are not yet prefaulted
    std::vector<uint64_t> ring_inodes_; // memif regions mapped when the link last came up
    uint64_t next_region_check_ = 0;    // while the gate waits: when to look at them again
    uint64_t peer_leaves_ = 0;
};

} // namespace ibex::soft::dpdk
