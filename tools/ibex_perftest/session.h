// One perftest-style session: place memory near the NIC, open the device, meet the peer
// over TCP and walk stock perftest's opening sequence with it (versions, system data, MTU,
// key records, the barrier after RTR), connect the QPs and print the header block. The runners (bw.cpp, lat.cpp) take it from there.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "tools/ibex_perftest/numa.h"
#include "tools/ibex_perftest/oob.h"
#include "tools/ibex_perftest/options.h"
#include "tools/ibex_perftest/rdma.h"
#include "tools/ibex_perftest/report.h"

namespace ibex::perftest {

inline constexpr int kConnectTimeoutMs = 3000; // client: give up on an absent server
inline constexpr int kPeerTimeoutMs = 30000;   // control messages during a run
inline constexpr int kStallTimeoutMs = 10000;  // no completion / no peer write for this long

inline uint64_t now_ns() {
    return static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
}

// Message sizes of the run: -a sweeps powers of two 2 B .. 8 MiB (atomics: 8 B only),
// else the one -s size.
std::vector<uint64_t> run_sizes(const Options &o);

class Session {
public:
    explicit Session(const Options &o);
    ~Session();
    Session(const Session &) = delete;
    Session &operator=(const Session &) = delete;

    // The peer writes/reads at region(i) + remote_offset of QP i. cq_mod (bandwidth) is
    // only printed.
    bool setup(const ResourceSpec &spec, size_t remote_offset, uint32_t cq_mod, std::string *err);

    // Report stream: stdout, or stderr when the JSON document goes to stdout.
    FILE *out() const { return out_; }
    bool client() const { return !o_.is_server(); }

    // Whether the peer is an ibex tool (its version field carries ibex's tag): only then
    // do ibex's own control messages (parameter check, every row for a passive server,
    // the count of a timed SEND run, errors) travel between stock perftest's messages.
    bool ibex_peer() const { return peer.ibex; }

    // perftest's barrier between phases: a key-record exchange on QP 0.
    bool sync(int timeout_ms, std::string *err) { return oob.key_barrier(client(), header.local[0], timeout_ms, err); }
    // perftest's closing exchange: that barrier, then "done".
    bool finish(int timeout_ms, std::string *err) {
        return oob.close_exchange(client(), header.local[0], timeout_ms, err);
    }

    // Waits for the peer's next control message; a peer that reports an error ("error:
    // ...") fails the call with that text.
    bool expect(std::string *msg, int timeout_ms, std::string *err);

    // Looks at the TCP connection without waiting: 1 and *msg when a control message came,
    // 0 when none, -1 when the peer closed or failed (*err says so, prefixed with `doing`).
    int peek(std::string *msg, const char *doing, std::string *err);

    const Options &o_;
    PeerVersion peer;
    Resources res;
    Oob oob;
    HeaderInfo header;
    NumaPlacement numa;

private:
    // Versions (refusing a peer older than 5.70) and system data.
    bool meet_peer(std::string *err);
    // The MTU both run; 0 (with *err) on failure.
    ibex_mtu_t agree_mtu(std::string *err);

    FILE *out_;
    FILE *null_out_ = nullptr; // where the tables go with --output
};

// Prints "<tool>: <msg>" on stderr, tells the peer (if connected) and returns 1, the
// tools' exit status on failure.
int fail(Session &s, const std::string &msg);
int fail(const Options &o, const std::string &msg);

// Installs SIGINT/SIGTERM handlers that only set a flag (--run_infinitely stops cleanly).
void catch_interrupts();
bool interrupted();

} // namespace ibex::perftest
