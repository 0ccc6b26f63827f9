// perftest-style command line of the ibex_*_bw / ibex_*_lat tools: the same flags with the
// same meaning and defaults as linux-rdma/perftest, parsed without global state.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

namespace ibex::perftest {

// The operation measured and how (perftest's "verb" and "test type").
enum class Verb { send, write, read, atomic };
enum class Kind { bw, lat };
enum class AtomicType { fetch_and_add, cmp_and_swap };
// --output: the whole report (table), or only one figure per size for scripts.
enum class Output { table, bandwidth, message_rate, latency };
// -H: every latency sample after its size's row, sorted; -U: in the order measured.
enum class Histogram { none, sorted, unsorted };

struct Test {
    Verb verb = Verb::write;
    Kind kind = Kind::bw;
};

inline constexpr uint16_t kDefaultPort = 18515;
inline constexpr uint64_t kMaxSize = 1ull << 30;    // largest message (-s), 1 GiB
inline constexpr uint64_t kAllMinSize = 2;          // -a sweeps 2 B ..
inline constexpr uint64_t kAllMaxSize = 8ull << 20; //          .. 8 MiB
inline constexpr uint64_t kAtomicSize = 8;          // atomics move 8 bytes, whatever -a says
inline constexpr uint32_t kMaxTxDepth = 4096;
inline constexpr uint32_t kMaxRxDepth = 16384;
inline constexpr uint32_t kMaxQps = 256;
inline constexpr uint64_t kMinIters = 5;
inline constexpr uint32_t kCqModeration = 100; // perftest's default CQ moderation
inline constexpr uint32_t kMaxInline = 64;      // -I: what every ibex provider takes inline
inline constexpr uint8_t kDefaultQpTimeout = 14; // -u: 4.096 us * 2^14 = 67 ms
inline constexpr const char *kPerftestJsonFile = "perftest_out.json"; // --out_json's default
inline constexpr int kDefaultDuration = 5;     // perftest's -D default (run_infinitely's interval)

struct Options {
    Test test;
    std::string device = "udp:lo";
    uint16_t port = kDefaultPort;
    uint64_t size = 0;         // set from the test's default unless -s
    bool all = false;          // -a
    uint64_t iters = 0;        // set from the test's default unless -n
    uint32_t tx_depth = 0;     // set from the test's default unless -t
    uint32_t rx_depth = 512;   // -r (send tests)
    uint32_t num_qps = 1;      // -q (bandwidth tests)
    uint32_t out_reads = 0;    // -o (read/atomic); 0: the device's maximum (16)
    AtomicType atomic_type = AtomicType::fetch_and_add; // -A
    bool bidirectional = false; // -b
    bool report_both = false;   // --report-both (with -b: local and remote separately)
    bool events = false;        // -e: sleep on CQ events while nothing can be posted
    bool run_infinitely = false; // --run_infinitely: a line every -D seconds until SIGINT
    int mtu = 0;               // -m, bytes; 0: the device's
    int duration = 0;          // -D seconds; 0: iteration mode
    bool report_gbits = false; // --report_gbits
    bool json = false;         // --json
    std::string json_path;     // empty: JSON on stdout (the tables then go to stderr)
    std::string server;        // client: the server's host; empty: this is the server
    int ib_port = 1;           // -i, accepted for compatibility (the soft provider has one port)
    int gid_index = -1;        // -x, accepted; ibex picks the GID (soft provider: its IPv4 address)
    int use_cuda = -1;         // --use_cuda=<id>; -1: host memory
    bool numa = true;          // bind to the NIC's NUMA node; --disable_numa turns it off
    bool ibex_alloc = true;    // host buffer from ibex_mem_alloc; --use_malloc: ordinary memory
    uint32_t cq_mod = 0;       // -Q: one signaled completion every cq_mod posts; 0: kCqModeration
    uint32_t post_list = 1;    // -l: work requests chained into one ibex_post_send
    bool no_peak = false;      // -N: no peak (no time stamp per post)
    uint8_t traffic_class = 0; // -T: the QPs' traffic class (DSCP << 2)
    uint8_t qp_timeout = kDefaultQpTimeout; // -u
    int sl = -1;               // -S: service level (RoCE: the VLAN priority); -1: the provider's
    uint32_t inline_size = 0;  // -I: messages up to this size are posted inline
    Output output = Output::table; // --output
    double limit_bw = 0;       // -w: fail when BW average is below (the report's unit)
    double limit_msgrate = 0;  // -y: fail when MsgRate (Mpps) is below
    Histogram histogram = Histogram::none; // -H, -U (latency tests)

    bool is_server() const { return server.empty(); }
    bool is_bw() const { return test.kind == Kind::bw; }
};

// "ibex_read_lat", ...
std::string tool_name(Test t);
// "read_lat", ...: the JSON "test" value and the run's parameter tag.
std::string test_tag(Test t);
void print_usage(Test t, FILE *out);

enum class ParseResult { ok, help, error };

// Parses argv into *o (defaults first). On error prints "<tool>: <reason>" and, for an
// unknown option or a missing value, the usage to stderr; on -h prints the usage to stdout.
ParseResult parse_options(Test t, int argc, char **argv, Options *o);

} // namespace ibex::perftest
