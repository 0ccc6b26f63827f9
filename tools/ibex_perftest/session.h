// One perftest-style session: open the device, meet the peer over TCP, swap key records,
// agree on the parameters, connect the QP and print the header block.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "ibex_perftest/oob.h"
#include "ibex_perftest/options.h"
#include "ibex_perftest/rdma.h"
#include "ibex_perftest/report.h"

namespace ibex::perftest {

inline constexpr int kConnectTimeoutMs = 3000; // client: give up on an absent server
inline constexpr int kPeerTimeoutMs = 30000;   // control messages during a run
inline constexpr int kStallTimeoutMs = 10000;  // no completion / no peer write for this long

inline uint64_t now_ns() {
    return static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
}

// Message sizes of the run: -a sweeps powers of two 2 B .. 8 MiB, else the one -s size.
std::vector<uint64_t> run_sizes(const Options &o);

class Session {
public:
    explicit Session(const Options &o);

    // buf_len bytes registered; the peer writes at buf + remote_offset.
    bool setup(size_t buf_len, size_t remote_offset, uint32_t max_send_wr, uint32_t cq_mod, std::string *err);

    // Report stream: stdout, or stderr when the JSON document goes to stdout.
    FILE *out() const { return out_; }
    bool client() const { return !o_.is_server(); }

    const Options &o_;
    Resources res;
    Oob oob;
    HeaderInfo header;

private:
    FILE *out_;
};

// With IBEX_PERFTEST_COUNTERS=1: the context's engine counters after the table
// (packets, retransmissions, timeouts, ECN marks), to tell a slow run from a lossy one.
void print_counters(FILE *out, ibex_context_t *ctx);

// Prints "<tool>: <msg>" on stderr and returns 1 (the tools' exit status on failure).
int fail(const Options &o, const std::string &msg);

} // namespace ibex::perftest
