#include "ibex_perftest/options.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string_view>

namespace ibex::perftest {

namespace {

struct Flag {
    char short_name;        // 0: long only
    const char *long_name;  // without "--"
    bool takes_value;
};

constexpr Flag kFlags[] = {
    {'d', "ib-dev", true},    {'p', "port", true},        {'s', "size", true},
    {'a', "all", false},      {'n', "iters", true},       {'t', "tx-depth", true},
    {'m', "mtu", true},       {'D', "duration", true},    {'F', "CPU-freq", false},
    {'c', "connection", true}, {'i', "ib-port", true},    {'x', "gid-index", true},
    {'h', "help", false},     {0, "report_gbits", false}, {0, "json", false},
};

const Flag *find_short(char c) {
    for (const Flag &f : kFlags)
        if (f.short_name == c) return &f;
    return nullptr;
}

const Flag *find_long(std::string_view name) {
    for (const Flag &f : kFlags)
        if (name == f.long_name) return &f;
    if (name == "report-gbits") return find_long("report_gbits");
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

class Parser {
public:
    Parser(Test t, Options *o) : t_(t), o_(o) {}

    // Unknown options and missing values get the usage; bad values a pointer to -h.
    bool error(const std::string &msg, bool usage = false) {
        if (usage) {
            std::fprintf(stderr, "%s: %s\n\n", tool_name(t_), msg.c_str());
            print_usage(t_, stderr);
        } else {
            std::fprintf(stderr, "%s: %s (see %s -h)\n", tool_name(t_), msg.c_str(), tool_name(t_));
        }
        return false;
    }

    bool number(const Flag &f, const char *v, uint64_t min, uint64_t max, uint64_t *out) {
        uint64_t x = 0;
        if (!parse_u64(v, &x))
            return error(std::string("option ") + flag_text(f) + " expects a number, got \"" + (v ? v : "") + "\"");
        if (x < min || x > max)
            return error(std::string("option ") + flag_text(f) + " value " + v + " is out of range [" +
                         std::to_string(min) + ", " + std::to_string(max) + "]");
        *out = x;
        return true;
    }

    static std::string flag_text(const Flag &f) {
        if (f.short_name) return std::string("-") + f.short_name;
        return std::string("--") + f.long_name;
    }

    bool apply(const Flag &f, const char *v) {
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
        case 'm':
            if (!parse_u64(v, &x) || (x != 256 && x != 512 && x != 1024 && x != 2048 && x != 4096))
                return error(std::string("invalid MTU \"") + v + "\": use 256, 512, 1024, 2048 or 4096");
            o_->mtu = static_cast<int>(x);
            return true;
        case 'D':
            if (!number(f, v, 1, 86400, &x)) return false;
            o_->duration = static_cast<int>(x);
            return true;
        case 'F': return true; // perftest: do not fail on CPU frequency mismatch; ibex uses a monotonic clock
        case 'c':
            if (std::strcmp(v, "RC") != 0) return error(std::string("connection type \"") + v + "\" is not supported (only RC)");
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
        default: break;
        }
        if (!std::strcmp(f.long_name, "report_gbits")) {
            o_->report_gbits = true;
            return true;
        }
        if (!std::strcmp(f.long_name, "json")) {
            o_->json = true;
            if (v) o_->json_path = v;
            return true;
        }
        return error(std::string("internal: unhandled option ") + flag_text(f));
    }

    // "--json FILE" takes FILE only when it looks like a path, so "--json HOST" still works.
    static bool looks_like_json_path(const char *a) {
        const std::string_view s(a);
        return s == "-" || s.find('/') != std::string_view::npos ||
               (s.size() > 5 && s.substr(s.size() - 5) == ".json");
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
                    return error(std::string("option '--") + name + "' takes no value");
                }
                if (!apply(*f, v)) return false;
            } else if (a[0] == '-' && a[1]) {
                // Short options; "-abc" groups and "-s4096" attached values as getopt allows.
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
                if (++positional > 1) return error(std::string("unexpected argument '") + a + "' (one server name at most)");
                o_->server = a;
            }
        }
        return true;
    }

    bool size_set_ = false;
    bool help_ = false;

private:
    Test t_;
    Options *o_;
};

} // namespace

const char *tool_name(Test t) { return t == Test::write_bw ? "ibex_write_bw" : "ibex_write_lat"; }

void print_usage(Test t, FILE *out) {
    const bool bw = t == Test::write_bw;
    std::fprintf(out,
                 "Usage:\n"
                 "  %1$s            start a server and wait for a connection\n"
                 "  %1$s <server>   connect to the server at <server>\n"
                 "\n"
                 "RDMA WRITE %2$s test in the style of perftest's ib_write_%3$s, over any ibex device.\n"
                 "Options (the same on both sides):\n"
                 "  -d, --ib-dev=<dev>      ibex device (default udp:lo; see ibex_get_device_list)\n"
                 "  -p, --port=<port>       TCP port of the out-of-band exchange (default %4$u)\n"
                 "  -s, --size=<bytes>      message size (default %5$s, at most %6$llu)\n"
                 "  -a, --all               run sizes 2 B .. 8 MiB (powers of two)\n"
                 "  -n, --iters=<n>         iterations per size (default %7$s, at least %8$llu)\n"
                 "  -t, --tx-depth=<n>      work requests in flight (default %9$s)\n"
                 "  -m, --mtu=<bytes>       path MTU: 256, 512, 1024, 2048 or 4096 (default: the device's)\n"
                 "  -D, --duration=<s>      run for <s> seconds instead of -n iterations\n"
                 "  -F, --CPU-freq          accepted for compatibility (ibex uses a monotonic clock)\n"
                 "  -c, --connection=RC     connection type (RC only)\n"
                 "  -i, --ib-port=1         accepted for compatibility\n"
                 "  -x, --gid-index=<n>     accepted for compatibility (the GID is the device's address)\n"
                 "      --report_gbits      report bandwidth in Gb/sec (10^9 bits) instead of MiB/sec\n"
                 "      --json[=FILE]       also write the results as JSON to FILE, or alone on stdout\n"
                 "                          (the tables then go to stderr); \"--json FILE\" works when\n"
                 "                          FILE contains '/' or ends in .json\n"
                 "  -h, --help              this text\n"
                 "\n"
                 "Environment: IBEX_LOG_LEVEL (error, warn, info, debug) and the IBEX_* engine\n"
                 "variables listed in README.md.\n",
                 tool_name(t), bw ? "bandwidth" : "latency", bw ? "bw" : "lat", unsigned(kDefaultPort),
                 bw ? "65536" : "2", static_cast<unsigned long long>(kMaxSize), bw ? "5000" : "1000",
                 static_cast<unsigned long long>(kMinIters), bw ? "128" : "1");
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
    const bool bw = t == Test::write_bw;
    if (!p.size_set_) o->size = bw ? 65536 : 2;
    const bool iters_set = o->iters != 0;
    if (!iters_set) o->iters = bw ? 5000 : 1000;
    if (!bw) o->tx_depth = 1; // a ping-pong keeps one write in flight
    else if (!o->tx_depth) o->tx_depth = 128;
    if (o->duration && o->all) {
        p.error("duration mode (-D) does not support running all sizes (-a)");
        return ParseResult::error;
    }
    if (o->duration && iters_set) {
        p.error("-D and -n exclude each other");
        return ParseResult::error;
    }
    if (o->device.empty()) {
        p.error("empty device name");
        return ParseResult::error;
    }
    return ParseResult::ok;
}

} // namespace ibex::perftest
