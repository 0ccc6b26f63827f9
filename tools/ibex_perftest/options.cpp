#include "tools/ibex_perftest/options.h"

#include <ibex/ibex.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "tools/ibex_perftest/oob.h"

namespace ibex::perftest {

namespace {

// Which tools take a flag, as perftest offers it (a flag of another tool is refused, not
// silently ignored: a script that passes -q to a latency test expects something).
enum Scope : unsigned {
    kAll = 0xff,
    kBw = 1,      // bandwidth tests
    kSend = 2,    // send tests
    kRdAtom = 4,  // read and atomic tests
    kAtomic = 8,  // atomic tests
    kInline = 16, // tests that can carry their payload inline (write, send)
    kLat = 32,    // latency tests
};

struct Flag {
    char short_name;       // 0: long only
    const char *long_name; // without "--"
    bool takes_value;
    unsigned scope;
};

constexpr Flag kFlags[] = {
    {'d', "ib-dev", true, kAll},         {'p', "port", true, kAll},
    {'s', "size", true, kAll},           {'a', "all", false, kAll},
    {'n', "iters", true, kAll},          {'t', "tx-depth", true, kBw},
    {'r', "rx-depth", true, kSend},      {'q', "qp", true, kBw},
    {'b', "bidirectional", false, kBw},  {'o', "outs", true, kRdAtom},
    {'e', "events", false, kBw},
    {'A', "atomic_type", true, kAtomic}, {'m', "mtu", true, kAll},
    {'D', "duration", true, kAll},       {'F', "CPU-freq", false, kAll},
    {'c', "connection", true, kAll},     {'i', "ib-port", true, kAll},
    {'x', "gid-index", true, kAll},      {'h', "help", false, kAll},
    {0, "report_gbits", false, kBw},     {0, "report-both", false, kBw},
    {0, "run_infinitely", false, kBw},   {0, "json", false, kAll},
    {0, "use_cuda", true, kAll},         {0, "disable_numa", false, kAll},
    {0, "use_malloc", false, kAll},
    {'Q', "cq-mod", true, kBw},          {'l', "post_list", true, kBw},
    {'N', "noPeak", false, kBw},         {'T', "tos", true, kAll},
    {'u', "qp-timeout", true, kAll},     {'I', "inline_size", true, kInline},
    {'w', "limit_bw", true, kBw},        {'y', "limit_msgrate", true, kBw},
    {0, "output", true, kAll},           {'V', "version", false, kAll},
    {'S', "sl", true, kAll},
    {'H', "report-histogram", false, kLat}, {'U', "report-unsorted", false, kLat},
    {0, "out_json", false, kAll},        {0, "out_json_file", true, kAll},
};

unsigned scope_of(Test t) {
    unsigned s = 0;
    if (t.kind == Kind::bw) s |= kBw;
    if (t.verb == Verb::send) s |= kSend;
    if (t.verb == Verb::read || t.verb == Verb::atomic) s |= kRdAtom;
    if (t.verb == Verb::atomic) s |= kAtomic;
    if (t.verb == Verb::write || t.verb == Verb::send) s |= kInline;
    if (t.kind == Kind::lat) s |= kLat;
    return s;
}

const Flag *find_short(char c) {
    for (const Flag &f : kFlags)
        if (f.short_name == c) return &f;
    return nullptr;
}

const Flag *find_long(std::string_view name) {
    for (const Flag &f : kFlags)
        if (name == f.long_name) return &f;
    // Spellings perftest users type interchangeably.
    if (name == "report-gbits") return find_long("report_gbits");
    if (name == "report_both") return find_long("report-both");
    if (name == "run-infinitely") return find_long("run_infinitely");
    if (name == "use-cuda") return find_long("use_cuda");
    if (name == "disable-numa") return find_long("disable_numa");
    if (name == "atomic-type") return find_long("atomic_type");
    if (name == "cq_mod") return find_long("cq-mod");
    if (name == "post-list") return find_long("post_list");
    if (name == "qp_timeout") return find_long("qp-timeout");
    if (name == "inline-size") return find_long("inline_size");
    if (name == "limit-bw") return find_long("limit_bw");
    if (name == "limit-msgrate") return find_long("limit_msgrate");
    return nullptr;
}

bool parse_u64(const char *s, uint64_t *out) {
    if (!s || !*s || *s == '-' || *s == '+') return false;
    errno = 0;
    char *end = nullptr;
    unsigned long long v = std::strtoull(s, &end, 10);
    if (errno || *end) return false;
    *out = v;
    return true;
}

bool parse_positive(const char *s, double *out) {
    if (!s || !*s) return false;
    errno = 0;
    char *end = nullptr;
    const double v = std::strtod(s, &end);
    if (errno || *end || !(v > 0) || v > 1e12) return false;
    *out = v;
    return true;
}

std::string flag_text(const Flag &f) {
    if (f.short_name) return std::string("-") + f.short_name;
    return std::string("--") + f.long_name;
}

class Parser {
public:
    Parser(Test t, Options *o) : t_(t), o_(o) {}

    // Unknown options and missing values get the usage; bad values a pointer to -h.
    bool error(const std::string &msg, bool usage = false) {
        const std::string tool = tool_name(t_);
        if (usage) {
            std::fprintf(stderr, "%s: %s\n\n", tool.c_str(), msg.c_str());
            print_usage(t_, stderr);
        } else {
            std::fprintf(stderr, "%s: %s (see %s -h)\n", tool.c_str(), msg.c_str(), tool.c_str());
        }
        return false;
    }

    bool number(const Flag &f, const char *v, uint64_t min, uint64_t max, uint64_t *out) {
        uint64_t x = 0;
        if (!parse_u64(v, &x))
            return error("option " + flag_text(f) + " expects a number, got \"" + (v ? v : "") + "\"");
        if (x < min || x > max)
            return error("option " + flag_text(f) + " value " + v + " is out of range [" + std::to_string(min) + ", " +
                         std::to_string(max) + "]");
        *out = x;
        return true;
    }

    bool apply_short(const Flag &f, const char *v) {
        uint64_t x = 0;
        switch (f.short_name) {
        case 'd': o_->device = v; return true;
        case 'p':
            if (!number(f, v, 1, 65535, &x)) return false;
            o_->port = static_cast<uint16_t>(x);
            return true;
        case 's':
            if (!parse_u64(v, &x)) return error(std::string("option -s expects a size in bytes, got \"") + v + "\"");
            if (x < 1 || x > kMaxSize)
                return error(std::string("message size ") + v + " is out of range: it must be between 1 and " +
                             std::to_string(kMaxSize) + " bytes (1 GiB)");
            if (t_.verb == Verb::atomic && x != kAtomicSize)
                return error(std::string("message size ") + v + " is not possible for atomics: they move 8 bytes");
            o_->size = x;
            size_set_ = true;
            return true;
        case 'a': o_->all = true; return true;
        case 'n':
            if (!number(f, v, kMinIters, 1ull << 32, &x)) return false;
            o_->iters = x;
            return true;
        case 't':
            if (!number(f, v, 1, kMaxTxDepth, &x)) return false;
            o_->tx_depth = static_cast<uint32_t>(x);
            return true;
        case 'r':
            if (!number(f, v, 1, kMaxRxDepth, &x)) return false;
            o_->rx_depth = static_cast<uint32_t>(x);
            return true;
        case 'q':
            if (!number(f, v, 1, kMaxQps, &x)) return false;
            o_->num_qps = static_cast<uint32_t>(x);
            return true;
        case 'b': o_->bidirectional = true; return true;
        case 'e': o_->events = true; return true;
        case 'o':
            if (!number(f, v, 1, 16, &x)) return false;
            o_->out_reads = static_cast<uint32_t>(x);
            return true;
        case 'A':
            if (!std::strcmp(v, "FETCH_AND_ADD")) o_->atomic_type = AtomicType::fetch_and_add;
            else if (!std::strcmp(v, "CMP_AND_SWAP")) o_->atomic_type = AtomicType::cmp_and_swap;
            else return error(std::string("atomic type \"") + v + "\" is not one of FETCH_AND_ADD, CMP_AND_SWAP");
            return true;
        case 'm':
            if (!parse_u64(v, &x) || (x != 256 && x != 512 && x != 1024 && x != 2048 && x != 4096))
                return error(std::string("invalid MTU \"") + v + "\": use 256, 512, 1024, 2048 or 4096");
            o_->mtu = static_cast<int>(x);
            return true;
        case 'D':
            if (!number(f, v, 1, 86400, &x)) return false;
            o_->duration = static_cast<int>(x);
            return true;
        case 'F': return true; // perftest: no CPU frequency warning; ibex uses a monotonic clock
        case 'c':
            if (std::strcmp(v, "RC") != 0)
                return error(std::string("connection type \"") + v + "\" is not supported (ibex QPs are RC)");
            return true;
        case 'i':
            if (!number(f, v, 1, 1, &x)) return false;
            o_->ib_port = 1;
            return true;
        case 'x':
            if (!number(f, v, 0, 255, &x)) return false;
            o_->gid_index = static_cast<int>(x);
            return true;
        case 'h': help_ = true; return true;
        case 'V': version_ = true; return true;
        case 'Q':
            if (!number(f, v, 1, kMaxTxDepth, &x)) return false;
            o_->cq_mod = static_cast<uint32_t>(x);
            return true;
        case 'l':
            if (!number(f, v, 1, kMaxTxDepth, &x)) return false;
            o_->post_list = static_cast<uint32_t>(x);
            return true;
        case 'N': o_->no_peak = true; return true;
        case 'H': o_->histogram = Histogram::sorted; return true;
        case 'U': o_->histogram = Histogram::unsorted; return true; // implies -H, as perftest's
        case 'S':
            // RoCE carries the service level in the VLAN header's 3 priority bits.
            if (!number(f, v, 0, 7, &x)) return false;
            o_->sl = static_cast<int>(x);
            return true;
        case 'T':
            if (!number(f, v, 0, 255, &x)) return false;
            o_->traffic_class = static_cast<uint8_t>(x);
            return true;
        case 'u':
            if (!number(f, v, 0, 31, &x)) return false;
            o_->qp_timeout = static_cast<uint8_t>(x);
            return true;
        case 'I':
            if (!number(f, v, 0, kMaxInline, &x)) return false;
            o_->inline_size = static_cast<uint32_t>(x);
            return true;
        case 'w':
            if (!parse_positive(v, &o_->limit_bw))
                return error(std::string("option -w expects a bandwidth above 0, got \"") + v + "\"");
            return true;
        case 'y':
            if (!parse_positive(v, &o_->limit_msgrate))
                return error(std::string("option -y expects a message rate (Mpps) above 0, got \"") + v + "\"");
            return true;
        default: return error("internal: unhandled option " + flag_text(f));
        }
    }

    bool apply(const Flag &f, const char *v) {
        if (f.scope != kAll && !(f.scope & scope_of(t_)))
            return error("option " + flag_text(f) + " does not apply to " + tool_name(t_), true);
        if (f.short_name) return apply_short(f, v);
        const std::string_view n(f.long_name);
        if (n == "report_gbits") o_->report_gbits = true;
        else if (n == "report-both") o_->report_both = true;
        else if (n == "run_infinitely") o_->run_infinitely = true;
        else if (n == "disable_numa") o_->numa = false;
        else if (n == "use_malloc") o_->ibex_alloc = false;
        else if (n == "output") {
            const bool bw = t_.kind == Kind::bw;
            if (bw && !std::strcmp(v, "bandwidth")) o_->output = Output::bandwidth;
            else if (bw && !std::strcmp(v, "message_rate")) o_->output = Output::message_rate;
            else if (!bw && !std::strcmp(v, "latency")) o_->output = Output::latency;
            else
                return error(std::string("--output=") + v + " is not one of " +
                             (bw ? "bandwidth, message_rate" : "latency") + " for " + tool_name(t_));
        }
        else if (n == "json") {
            o_->json = true;
            if (v) o_->json_path = v;
        } else if (n == "out_json") {
            // perftest's names: a file, perftest_out.json unless --out_json_file names one.
            o_->json = true;
            if (o_->json_path.empty()) o_->json_path = kPerftestJsonFile;
        } else if (n == "out_json_file") {
            if (!*v) return error("--out_json_file needs a file name");
            o_->json = true;
            o_->json_path = v;
        } else if (n == "use_cuda") {
            uint64_t x = 0;
            if (!number(f, v, 0, 1023, &x)) return false;
            o_->use_cuda = static_cast<int>(x);
        } else {
            return error("internal: unhandled option " + flag_text(f));
        }
        return true;
    }

    // "--json FILE" takes FILE only when it looks like a path, so "--json HOST" still works.
    static bool looks_like_json_path(const char *a) {
        const std::string_view s(a);
        return s == "-" || s.find('/') != std::string_view::npos || (s.size() > 5 && s.substr(s.size() - 5) == ".json");
    }

    bool run(int argc, char **argv) {
        int positional = 0;
        for (int i = 1; i < argc; ++i) {
            const char *a = argv[i];
            if (a[0] == '-' && a[1] == '-' && a[2]) {
                std::string_view body(a + 2);
                std::string name(body.substr(0, body.find('=')));
                const char *inline_value = body.find('=') == std::string_view::npos ? nullptr : a + 2 + name.size() + 1;
                const Flag *f = find_long(name);
                if (!f) return error(std::string("unknown option '") + a + "'", true);
                const char *v = inline_value;
                if (!std::strcmp(f->long_name, "json")) {
                    if (!v && i + 1 < argc && looks_like_json_path(argv[i + 1])) v = argv[++i];
                } else if (f->takes_value && !v) {
                    if (i + 1 >= argc) return error(std::string("option '") + a + "' needs a value", true);
                    v = argv[++i];
                } else if (!f->takes_value && v) {
                    return error("option '--" + name + "' takes no value");
                }
                if (!apply(*f, v)) return false;
            } else if (a[0] == '-' && a[1]) {
                // Short options; "-ab" groups and "-s4096" attached values as getopt allows.
                for (const char *p = a + 1; *p; ++p) {
                    const Flag *f = find_short(*p);
                    if (!f) return error(std::string("unknown option '-") + *p + "'", true);
                    const char *v = nullptr;
                    if (f->takes_value) {
                        if (p[1]) {
                            v = p + 1;
                        } else {
                            if (i + 1 >= argc) return error(std::string("option '-") + *p + "' needs a value", true);
                            v = argv[++i];
                        }
                    }
                    if (!apply(*f, v)) return false;
                    if (v) break;
                }
            } else {
                if (++positional > 1)
                    return error(std::string("unexpected argument '") + a + "' (one server name at most)");
                o_->server = a;
            }
        }
        return true;
    }

    bool size_set_ = false;
    bool help_ = false;
    bool version_ = false;

private:
    Test t_;
    Options *o_;
};

const char *verb_word(Verb v) {
    switch (v) {
    case Verb::send: return "send";
    case Verb::write: return "write";
    case Verb::read: return "read";
    case Verb::atomic: return "atomic";
    }
    return "?";
}

uint64_t default_iters(Test t) { return t.verb == Verb::write && t.kind == Kind::bw ? 5000 : 1000; }

} // namespace

std::string test_tag(Test t) { return std::string(verb_word(t.verb)) + (t.kind == Kind::bw ? "_bw" : "_lat"); }

std::string tool_name(Test t) { return "ibex_" + test_tag(t); }

void print_usage(Test t, FILE *out) {
    const std::string tool = tool_name(t);
    const bool bw = t.kind == Kind::bw;
    const char *what = t.verb == Verb::send     ? "SEND/RECEIVE"
                       : t.verb == Verb::write  ? "RDMA WRITE"
                       : t.verb == Verb::read   ? "RDMA READ"
                                                : "atomic (fetch-and-add or compare-and-swap)";
    std::fprintf(out,
                 "Usage:\n"
                 "  %1$s            start a server and wait for a connection\n"
                 "  %1$s <server>   connect to the server at <server>\n"
                 "\n"
                 "%2$s %3$s test with the flags and tables of perftest's ib_%4$s, over any ibex\n"
                 "device. Give both sides the same options.\n"
                 "\n"
                 "Options:\n"
                 "  -d, --ib-dev=<dev>      ibex device (default udp:lo): udp:<if>, dpdk:<port>, an RDMA device\n"
                 "  -p, --port=<port>       TCP port of the out-of-band exchange (default %5$u)\n",
                 tool.c_str(), what, bw ? "bandwidth" : "latency", test_tag(t).c_str(), unsigned(kDefaultPort));
    if (t.verb == Verb::atomic) {
        std::fprintf(out, "  -A, --atomic_type=<t>   FETCH_AND_ADD (default) or CMP_AND_SWAP\n"
                          "  -a, --all               accepted; atomics always move 8 bytes\n");
    } else {
        std::fprintf(out,
                     "  -s, --size=<bytes>      message size (default %s, at most %llu)\n"
                     "  -a, --all               every power of two from 2 B to 8 MiB\n",
                     bw ? "65536" : "2", static_cast<unsigned long long>(kMaxSize));
    }
    std::fprintf(out,
                 "  -n, --iters=<n>         iterations per size (default %llu, at least %llu)\n"
                 "  -D, --duration=<s>      measure for <s> seconds instead of -n iterations\n",
                 static_cast<unsigned long long>(default_iters(t)), static_cast<unsigned long long>(kMinIters));
    if (bw) {
        std::fprintf(out, "  -t, --tx-depth=<n>      work requests in flight per QP (default 128)\n"
                          "  -q, --qp=<n>            number of QPs (default 1)\n"
                          "  -b, --bidirectional     both sides send; the reported figure is the sum\n"
                          "      --report-both       with -b, also print each direction on its own\n"
                          "  -e, --events            sleep on completion events while no more can be posted,\n"
                          "                          instead of polling (the progress thread moves the packets)\n"
                          "      --run_infinitely    print a line every -D seconds (default 5) until Ctrl-C\n"
                          "      --report_gbits      bandwidth in Gb/sec (10^9 bits) instead of MiB/sec (2^20 bytes)\n"
                          "  -Q, --cq-mod=<n>        one signaled completion every <n> posts (default 100)\n"
                          "  -l, --post_list=<n>     post <n> chained work requests per call; each list ends\n"
                          "                          with the signaled one (the CQ moderation is <n>)\n"
                          "  -N, --noPeak            no peak bandwidth (no time stamp per post); prints 0.00\n"
                          "  -w, --limit_bw=<bw>     exit 1 when a BW average is below <bw> (the table's unit)\n"
                          "  -y, --limit_msgrate=<r> exit 1 when a MsgRate is below <r> Mpps\n"
                          "      --output=<what>     print only bandwidth or message_rate, one line per size\n");
    } else {
        std::fprintf(out, "      --output=latency    print only t_typical (usec), one line per size\n");
    }
    if (t.verb == Verb::write || t.verb == Verb::send)
        std::fprintf(out, "  -I, --inline_size=<n>   post messages of up to <n> bytes inline (at most %u; default 0)\n",
                     kMaxInline);
    if (t.verb == Verb::send) std::fprintf(out, "  -r, --rx-depth=<n>      receives posted per QP (default 512)\n");
    if (t.verb == Verb::read || t.verb == Verb::atomic)
        std::fprintf(out, "  -o, --outs=<n>          outstanding reads/atomics per QP, 1..16 (default 16)\n");
    std::fprintf(out,
                 "  -m, --mtu=<bytes>       path MTU: 256, 512, 1024, 2048 or 4096 (default: the device's)\n"
                 "  -c, --connection=RC     connection type (RC only)\n"
                 "  -i, --ib-port=1         accepted for compatibility (one port per ibex device)\n"
                 "  -x, --gid-index=<n>     accepted; ibex picks the device's GID (soft: its IPv4 address)\n"
                 "  -F, --CPU-freq          accepted; ibex times with a monotonic clock, not CPU cycles\n"
                 "  -T, --tos=<0-255>       the QPs' traffic class: DSCP << 2 (ECN is the provider's)\n"
                 "  -u, --qp-timeout=<n>    transport timeout, 4.096 us * 2^<n>, 0..31 (default 14)\n"
                 "  -S, --sl=<0-7>          the QPs' service level: the VLAN priority of their frames\n"
                 "                          (an RNIC's, a DPDK port's with a VLAN; on the udp port\n"
                 "                          the socket priority, which a VLAN device maps)\n"
                 "      --use_cuda=<id>     buffers in the memory of GPU <id> (needs ibex built with CUDA)\n"
                 "      --disable_numa      do not bind memory and this thread to the NIC's NUMA node\n"
                 "      --use_malloc        ordinary (NUMA-placed) memory for the buffer instead of\n"
                 "                          ibex_mem_alloc (on shm: CMA instead of a shared mapping)\n"
                 "  -H, --report-histogram  latency: every sample after its size's row, sorted\n"
                 "  -U, --report-unsorted   latency: the same in the order measured (implies -H)\n"
                 "      --out_json          write the results as JSON to perftest_out.json\n"
                 "      --out_json_file=F   ... to F instead\n"
                 "      --json[=FILE]       also write the results as JSON to FILE, or alone on stdout\n"
                 "                          (the tables then go to stderr); \"--json FILE\" works when\n"
                 "                          FILE contains '/' or ends in .json\n"
                 "  -V, --version           ibex's version and the perftest exchange it speaks\n"
                 "  -h, --help              this text\n"
                 "\n"
                 "Environment: IBEX_LOG_LEVEL (error, warn, info, debug), IBEX_PERFTEST_COUNTERS=1 (engine\n"
                 "counters after the table) and the IBEX_* engine variables listed in README.md.\n");
}

ParseResult parse_options(Test t, int argc, char **argv, Options *o) {
    *o = Options{};
    o->test = t;
    Parser p(t, o);
    if (!p.run(argc, argv)) return ParseResult::error;
    if (p.help_) {
        print_usage(t, stdout);
        return ParseResult::help;
    }
    if (p.version_) {
        const int v = ibex_version();
        std::printf("%s: ibex %d.%d.%d, perftest's flags and out-of-band exchange (version field \"%s\")\n",
                    tool_name(t).c_str(), v / 10000, v / 100 % 100, v % 100, version_field().c_str());
        return ParseResult::help;
    }
    const bool bw = t.kind == Kind::bw;
    if (t.verb == Verb::atomic) o->size = kAtomicSize;
    else if (!p.size_set_) o->size = bw ? 65536 : 2;
    const bool iters_set = o->iters != 0;
    if (!iters_set) o->iters = default_iters(t);
    if (!bw) o->tx_depth = 1; // a latency test keeps one operation in flight
    else if (!o->tx_depth) o->tx_depth = 128;
    if (!o->out_reads) o->out_reads = 16;
    auto bad = [&](const char *msg) {
        p.error(msg);
        return ParseResult::error;
    };
    if (o->run_infinitely) {
        if (o->all) return bad("--run_infinitely runs one size: it excludes -a");
        if (iters_set) return bad("--run_infinitely excludes -n (it reports every -D seconds)");
        if (!o->duration) o->duration = kDefaultDuration;
    }
    if (o->duration && o->all && !o->run_infinitely) return bad("duration mode (-D) does not support all sizes (-a)");
    if (o->duration && iters_set) return bad("-D and -n exclude each other");
    if (o->device.empty()) return bad("empty device name");
    if (o->output != Output::table && o->json && (o->json_path.empty() || o->json_path == "-"))
        return bad("--output and --json both want stdout: give --json a file");
    if (o->post_list > 1) {
        // As perftest: each list ends with the one signaled request of its posts, so the
        // moderation is the list's length.
        if (o->cq_mod && o->cq_mod != o->post_list)
            return bad("-Q and -l: with a post list the CQ moderation is the list's length (drop -Q)");
        if (o->post_list > o->tx_depth) return bad("-l: a post list must fit in the tx depth (-t)");
        o->cq_mod = o->post_list;
    }
    if (!o->cq_mod) o->cq_mod = kCqModeration;
    return ParseResult::ok;
}

} // namespace ibex::perftest
