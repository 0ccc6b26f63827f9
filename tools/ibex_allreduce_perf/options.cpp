#include "tools/ibex_allreduce_perf/options.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>

namespace ibex::collperf {

const char *coll_name(Coll c) {
    switch (c) {
    case Coll::allreduce: return "allreduce";
    case Coll::reduce_scatter: return "reduce_scatter";
    case Coll::allgather: return "allgather";
    case Coll::broadcast: return "broadcast";
    case Coll::reduce: return "reduce";
    case Coll::alltoall: return "alltoall";
    case Coll::sendrecv: return "sendrecv";
    }
    return "?";
}

bool coll_reduces(Coll c) { return c == Coll::allreduce || c == Coll::reduce_scatter || c == Coll::reduce; }
bool coll_rooted(Coll c) { return c == Coll::broadcast || c == Coll::reduce; }
bool coll_split(Coll c) { return c == Coll::allgather || c == Coll::reduce_scatter || c == Coll::alltoall; }
bool coll_in_place(Coll c) { return c != Coll::alltoall && c != Coll::sendrecv; }

double bus_factor(Coll c, int n) {
    switch (c) {
    case Coll::allreduce: return 2.0 * (n - 1) / n;
    case Coll::reduce_scatter:
    case Coll::allgather:
    case Coll::alltoall: return static_cast<double>(n - 1) / n;
    default: return 1.0;
    }
}

std::string device_for_rank(const std::string &device, int rank) {
    static const std::string kToken = "{rank}";
    std::string out = device;
    for (size_t at = out.find(kToken); at != std::string::npos; at = out.find(kToken, at)) {
        const std::string r = std::to_string(rank);
        out.replace(at, kToken.size(), r);
        at += r.size();
    }
    return out;
}

bool parse_size(const char *s, size_t *out) {
    if (!s || !*s) return false;
    errno = 0;
    char *end = nullptr;
    const unsigned long long v = std::strtoull(s, &end, 10);
    if (errno || end == s || s[0] == '-') return false;
    unsigned long long mult = 1;
    switch (*end) {
    case '\0': break;
    case 'k': case 'K': mult = 1ull << 10; ++end; break;
    case 'm': case 'M': mult = 1ull << 20; ++end; break;
    case 'g': case 'G': mult = 1ull << 30; ++end; break;
    default: return false;
    }
    if (*end == 'B' || *end == 'b') ++end;
    if (*end) return false;
    if (v > (1ull << 40) / mult) return false; // 1 TiB is far beyond anything sensible
    *out = static_cast<size_t>(v * mult);
    return true;
}

namespace {

bool parse_int(const char *s, int lo, int hi, int *out) {
    if (!s || !*s) return false;
    errno = 0;
    char *end = nullptr;
    const long v = std::strtol(s, &end, 10);
    if (errno || *end || v < lo || v > hi) return false;
    *out = static_cast<int>(v);
    return true;
}

bool parse_type(std::string_view s, ibex_datatype_t *out) {
    // nccl-tests' names, plus the short forms people type.
    const struct {
        const char *name;
        ibex_datatype_t t;
    } names[] = {{"float", IBEX_F32},  {"float32", IBEX_F32}, {"f32", IBEX_F32},      {"half", IBEX_F16},
                 {"float16", IBEX_F16}, {"f16", IBEX_F16},     {"bfloat16", IBEX_BF16}, {"bf16", IBEX_BF16},
                 {"double", IBEX_F64}, {"float64", IBEX_F64}, {"f64", IBEX_F64},      {"int32", IBEX_I32},
                 {"int", IBEX_I32},    {"i32", IBEX_I32},     {"int64", IBEX_I64},    {"i64", IBEX_I64},
                 {"uint8", IBEX_U8},   {"u8", IBEX_U8}};
    for (const auto &n : names) {
        if (s == n.name) {
            *out = n.t;
            return true;
        }
    }
    return false;
}

bool parse_op(std::string_view s, ibex_redop_t *out) {
    for (int o = 0; o < IBEX_REDOP_COUNT; ++o) {
        if (s == ibex_redop_name(static_cast<ibex_redop_t>(o))) {
            *out = static_cast<ibex_redop_t>(o);
            return true;
        }
    }
    return false;
}

bool parse_coll(std::string_view s, Coll *out) {
    for (Coll c : {Coll::allreduce, Coll::reduce_scatter, Coll::allgather, Coll::broadcast, Coll::reduce, Coll::alltoall,
                   Coll::sendrecv}) {
        if (s == coll_name(c)) {
            *out = c;
            return true;
        }
    }
    // nccl-tests' binary names without "_perf".
    if (s == "all_reduce" || s == "all_gather") {
        *out = s == "all_reduce" ? Coll::allreduce : Coll::allgather;
        return true;
    }
    return false;
}

// The flags that take a value, as (short, long). A short flag may be written "-b 8",
// "-b8" or "--minbytes=8"/"--minbytes 8".
struct Flag {
    const char *shrt;
    const char *lng;
};
constexpr Flag kValueFlags[] = {
    {"b", "minbytes"}, {"e", "maxbytes"}, {"i", "stepbytes"}, {"f", "stepfactor"}, {"n", "iters"},
    {"w", "warmup_iters"}, {"c", "check"}, {"d", "datatype"}, {"o", "op"}, {"r", "root"},
    {"z", "blocking"}, {"a", "average"}, {"T", "timeout"}, {"np", "nprocs"}, {nullptr, "bind"}, {nullptr, "coll"},
    {nullptr, "device"}, {nullptr, "algo"}, {"G", "gpu"}, {nullptr, "mem"},
    {"R", "local_register"}, {nullptr, "ranks_per_host"},
};

std::string bad(const char *flag, const char *value, const char *why) {
    return std::string("invalid value \"") + value + "\" for " + flag + ": " + why;
}

} // namespace

std::string parse_options(int argc, char **argv, Coll default_coll, Options *o) {
    *o = Options{};
    o->coll = default_coll;
    bool types_all = false, ops_all = false;
    for (int i = 1; i < argc; ++i) {
        const char *arg = argv[i];
        if (!std::strcmp(arg, "-h") || !std::strcmp(arg, "--help")) {
            o->help = true;
            return "";
        }
        if (!std::strncmp(arg, "--json", 6) && (arg[6] == '\0' || arg[6] == '=')) {
            o->json = true;
            if (arg[6] == '=') o->json_path = arg + 7;
            continue;
        }
        if (arg[0] != '-' || arg[1] == '\0')
            return std::string("unexpected argument \"") + arg + "\" (flags start with -; see --help)";
        // Find the flag: "--long[=v]", "-np N", "-x[v]".
        const Flag *flag = nullptr;
        const char *value = nullptr;
        if (arg[1] == '-') {
            const char *name = arg + 2;
            const char *eq = std::strchr(name, '=');
            const size_t len = eq ? static_cast<size_t>(eq - name) : std::strlen(name);
            for (const Flag &f : kValueFlags) {
                if (std::strlen(f.lng) == len && !std::strncmp(f.lng, name, len)) flag = &f;
            }
            if (flag && eq) value = eq + 1;
        } else if (!std::strcmp(arg + 1, "np")) {
            flag = &kValueFlags[13];
        } else {
            for (const Flag &f : kValueFlags) {
                if (f.shrt && std::strlen(f.shrt) == 1 && arg[1] == f.shrt[0]) flag = &f;
            }
            if (flag && arg[2]) value = arg + 2;
        }
        if (!flag) return std::string("unknown flag \"") + arg + "\" (see --help)";
        if (!value) {
            if (i + 1 >= argc) return std::string(arg) + " needs a value";
            value = argv[++i];
        }
        const std::string name = std::string(flag->shrt ? "-" : "--") + (flag->shrt ? flag->shrt : flag->lng);
        const std::string_view f = flag->lng;
        if (f == "minbytes" || f == "maxbytes" || f == "stepbytes") {
            size_t v = 0;
            if (!parse_size(value, &v)) return bad(name.c_str(), value, "expected a size such as 8, 64K, 1M, 2G");
            (f == "minbytes" ? o->min_bytes : f == "maxbytes" ? o->max_bytes : o->step_bytes) = v;
        } else if (f == "stepfactor") {
            int v = 0;
            if (!parse_int(value, 1, 1 << 20, &v)) return bad(name.c_str(), value, "expected an integer factor >= 1");
            o->step_factor = static_cast<size_t>(v);
        } else if (f == "iters" || f == "warmup_iters" || f == "check") {
            int v = 0;
            const int lo = f == "iters" ? 1 : 0;
            if (!parse_int(value, lo, 1 << 24, &v))
                return bad(name.c_str(), value, lo ? "expected an integer >= 1" : "expected an integer >= 0");
            (f == "iters" ? o->iters : f == "warmup_iters" ? o->warmup : o->check) = v;
        } else if (f == "datatype") {
            o->types.clear();
            if (!std::strcmp(value, "all")) {
                types_all = true;
            } else {
                ibex_datatype_t t{};
                if (!parse_type(value, &t))
                    return bad(name.c_str(), value, "expected float, half, bfloat16, double, int32, int64, uint8 or all");
                o->types.push_back(t);
            }
        } else if (f == "op") {
            o->ops.clear();
            if (!std::strcmp(value, "all")) {
                ops_all = true;
            } else {
                ibex_redop_t op{};
                if (!parse_op(value, &op)) return bad(name.c_str(), value, "expected sum, prod, min, max, avg or all");
                o->ops.push_back(op);
            }
        } else if (f == "root") {
            if (!parse_int(value, 0, INT_MAX, &o->root)) return bad(name.c_str(), value, "expected a rank >= 0");
        } else if (f == "blocking") {
            if (!parse_int(value, 0, 1, &o->blocking)) return bad(name.c_str(), value, "expected 0 or 1");
        } else if (f == "average") {
            if (!parse_int(value, 0, 3, &o->average)) return bad(name.c_str(), value, "expected 0, 1, 2 or 3");
        } else if (f == "timeout") {
            int s = 0;
            if (!parse_int(value, 0, 86400, &s)) return bad(name.c_str(), value, "expected seconds, 0 .. 86400");
            o->timeout_ms = s * 1000;
        } else if (f == "nprocs") {
            if (!parse_int(value, 1, 256, &o->nprocs)) return bad(name.c_str(), value, "expected 1 .. 256 ranks");
        } else if (f == "ranks_per_host") {
            if (!parse_int(value, 1, 256, &o->ranks_per_host)) return bad(name.c_str(), value, "expected 1 .. 256 ranks");
        } else if (f == "bind") {
            if (std::strcmp(value, "core") != 0 && std::strcmp(value, "none") != 0) return bad(name.c_str(), value, "expected core or none");
            o->bind = std::strcmp(value, "core") == 0;
        } else if (f == "coll") {
            if (!parse_coll(value, &o->coll))
                return bad(name.c_str(), value, "expected allreduce, reduce_scatter, allgather, broadcast, reduce, alltoall or sendrecv");
        } else if (f == "device") {
            o->device = value;
        } else if (f == "gpu") {
            int v = 0;
            if (!parse_int(value, 0, 1, &v)) return bad(name.c_str(), value, "expected 0 (host buffers) or 1 (GPU buffers)");
            o->gpu = v == 1;
        } else if (f == "mem") {
            if (std::strcmp(value, "host") && std::strcmp(value, "cuda")) return bad(name.c_str(), value, "expected host or cuda");
            o->gpu = !std::strcmp(value, "cuda");
        } else if (f == "local_register") {
            int v = 0;
            if (!parse_int(value, 0, 1, &v))
                return bad(name.c_str(), value, "expected 0 (buffers from malloc) or 1 (from ibex_comm_mem_alloc)");
            o->shared = v == 1;
        } else if (f == "algo") {
            static const char *const known[] = {"ring", "rhd", "tree", "hierarchical", "bigraph", "gdraa", "sumsrv"};
            if (std::none_of(std::begin(known), std::end(known), [&](const char *k) { return !std::strcmp(value, k); }))
                return bad(name.c_str(), value, "expected ring, rhd, tree, hierarchical, bigraph, gdraa or sumsrv");
            o->algo = value;
        }
    }
    if (types_all) {
        for (int t = 0; t < IBEX_DATATYPE_COUNT; ++t) o->types.push_back(static_cast<ibex_datatype_t>(t));
    }
    if (ops_all) {
        for (int op = 0; op < IBEX_REDOP_COUNT; ++op) o->ops.push_back(static_cast<ibex_redop_t>(op));
    }
    if (!coll_reduces(o->coll)) o->ops = {IBEX_SUM}; // no op column to vary ("none")
    if (o->min_bytes > o->max_bytes) return "-b (min bytes) is larger than -e (max bytes)";
    if (o->step_factor == 1 && o->step_bytes == 0) return "-i (step bytes) must be > 0 when -f is 1";
    if (!o->algo.empty() && o->coll != Coll::allreduce) return "--algo applies to allreduce only";
    if (o->shared && o->gpu) return "-R 1 (buffers from ibex_comm_mem_alloc) is host memory; it does not go with -G 1";
    if (o->ranks_per_host && !o->nprocs)
        return "--ranks_per_host names the hosts of -np ranks; under a launcher set IBEX_HOST_ID per rank";
    return "";
}

void print_usage(const char *prog) {
    std::printf(
        "Usage: %s [flags]\n"
        "Measures an ibex collective the way nccl-tests does; prints nccl-tests' table.\n"
        "  -b, --minbytes <size>      smallest size (8, 64K, 1M, 2G; default 32M)\n"
        "  -e, --maxbytes <size>      largest size (default 32M)\n"
        "  -i, --stepbytes <size>     increment when -f is 1 (default 1M)\n"
        "  -f, --stepfactor <n>       multiply the size by n each step (default 1)\n"
        "  -n, --iters <n>            timed iterations per size (default 20)\n"
        "  -w, --warmup_iters <n>     untimed iterations first (default 1)\n"
        "  -c, --check <0/1>          check the results (#wrong); 0 prints N/A (default 1)\n"
        "  -d, --datatype <type>      float, half, bfloat16, double, int32, int64, uint8 or all (default float)\n"
        "  -o, --op <op>              sum, prod, min, max, avg or all (default sum)\n"
        "  -r, --root <rank>          root of broadcast and reduce (default 0)\n"
        "  -z, --blocking <0/1>       1: wait for each operation before issuing the next (default 0)\n"
        "  -a, --average <0/1/2/3>    time of rank 0, mean, min or max over ranks (default 1)\n"
        "  -T, --timeout <s>          fail a collective that waits longer (default IBEX_TIMEOUT_MS, 30 s)\n"
        "      --coll <name>          allreduce, reduce_scatter, allgather, broadcast, reduce or\n"
        "                             alltoall or sendrecv (out of place only: their in-place\n"
        "                             columns print N/A; sendrecv: to rank+1, from rank-1)\n"
        "                             (default from the program name: ibex_allreduce_perf, ...)\n"
        "  -np <n>                    fork n local ranks (one host); without it the ranks come from\n"
        "                             mpirun, srun, torchrun or IBEX_RANK/IBEX_NRANKS, else 1 rank\n"
        "      --bind <core|none>     core: each -np rank on a core of its own when they fit, as\n"
        "                             mpirun binds by default (default core)\n"
        "      --ranks_per_host <n>   with -np: ranks r and s share a host only when r / n == s / n\n"
        "                             (IBEX_HOST_ID), so ranks of different hosts talk over --device\n"
        "                             as across a network (default: all on this host)\n"
        "      --device <dev>         device every rank opens, e.g. udp:lo (default IBEX_DEVICE);\n"
        "                             {rank} in it becomes the rank's number\n"
        "      --algo <name>          force the allreduce algorithm: ring, rhd, tree, hierarchical,\n"
        "                             bigraph, gdraa or sumsrv (IBEX_SUMSRV's servers; default: cost model)\n"
        "  -G, --gpu <0/1>            1: buffers in GPU memory, GPU rank %% count (default 0)\n"
        "      --mem <host|cuda>      the same as -G 0 / -G 1\n"
        "  -R, --local_register <0/1> 1: host buffers from ibex_comm_mem_alloc, which same-host\n"
        "                             peers map, so collectives use them in place (default 0:\n"
        "                             page-aligned malloc, as Open MPI's tests use)\n"
        "      --json[=FILE]          also write the results as JSON to FILE, or alone on stdout\n"
        "  -h, --help                 this text\n",
        prog);
}

} // namespace ibex::collperf
