// perftest-style command line of the ibex_*_bw / ibex_*_lat tools: the same flags with the
// same meaning and defaults as linux-rdma/perftest, parsed without global state.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

namespace ibex::perftest {

enum class Test { write_bw, write_lat };

inline constexpr uint16_t kDefaultPort = 18515;
inline constexpr uint64_t kMaxSize = 1ull << 30;       // largest message (-s), 1 GiB
inline constexpr uint64_t kAllMinSize = 2;             // -a sweeps 2 B ..
inline constexpr uint64_t kAllMaxSize = 8ull << 20;    //          .. 8 MiB
inline constexpr uint32_t kMaxTxDepth = 4096;
inline constexpr uint64_t kMinIters = 5;
inline constexpr uint32_t kCqModeration = 100;         // perftest's default CQ moderation

struct Options {
    Test test = Test::write_bw;
    std::string device = "udp:lo";
    uint16_t port = kDefaultPort;
    uint64_t size = 0;          // set from the test's default unless -s
    bool all = false;           // -a
    uint64_t iters = 0;         // set from the test's default unless -n
    uint32_t tx_depth = 0;      // set from the test's default unless -t
    int mtu = 0;                // -m, bytes; 0: the device's
    int duration = 0;           // -D seconds; 0: iteration mode
    bool report_gbits = false;  // --report_gbits
    bool json = false;          // --json
    std::string json_path;      // empty: JSON on stdout (the tables then go to stderr)
    std::string server;         // client: the server's host; empty: this is the server
    int ib_port = 1;            // -i, accepted for compatibility (the soft provider has one port)
    int gid_index = -1;         // -x, accepted; the soft provider's GID is its IPv4 address

    bool is_server() const { return server.empty(); }
    bool is_bw() const { return test == Test::write_bw; }
};

const char *tool_name(Test t);
void print_usage(Test t, FILE *out);

enum class ParseResult { ok, help, error };

// Parses argv into *o (defaults first). On error prints "<tool>: <reason>" and the usage
// to stderr; on -h prints the usage to stdout.
ParseResult parse_options(Test t, int argc, char **argv, Options *o);

} // namespace ibex::perftest
