// ibex_bench_staging_model: allreduce busbw on simulated GPU buffers (runtime/base/
// simulated_device.h) staged over udp:lo, beside host buffers, with ops issued without
// waiting (-z 0, the staging then overlaps one op's copies with its neighbours' wire time)
// and one at a time (-z 1). The simulated copies land by the clock of a modelled copy
// engine (--gbps, --latency-us; one in-order stream per rank), so the staging's waits are
// real waits. By default the CPU moves the bytes when a fence completes, a cost a GPU's
// copy engine does not put on the CPU (so the GPU/host ratios are lower bounds for the
// model), and every result is checked; --timing-only leaves them unmoved and unchecked.
// The figures are of the model, not of a GPU: scripts/gpu-check.sh's staging part
// measures the real thing.
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <ibex/coll.h>

#include "runtime/base/simulated_device.h"

namespace {

struct Options {
    int nranks = 2;
    std::vector<size_t> sizes{1 << 20, 4 << 20, 16 << 20};
    double gbps = 25;
    double latency_us = 10;
    int iters = 20, warmup = 3, reps = 3;
    bool timing_only = false;
};

// A simulated cudaMalloc: a view the CPU cannot touch, backed by host bytes.
struct SimBuffer {
    void *view = nullptr;
    std::vector<float> backing;
    size_t bytes = 0;
    explicit SimBuffer(size_t n) : backing(n, 1.0f), bytes(n * 4) {
        view = mmap(nullptr, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (view == MAP_FAILED || !ibex::cuda::simulated::add_range(view, bytes, backing.data())) view = nullptr;
    }
    ~SimBuffer() {
        if (view) {
            ibex::cuda::simulated::remove_range(view);
            munmap(view, bytes);
        }
    }
};

bool check(ibex_status_t st, const char *what) {
    if (st == IBEX_OK) return true;
    std::fprintf(stderr, "ibex_bench_staging_model: %s: %s\n", what, ibex_last_error());
    return false;
}

// One rank's run: microseconds per op (rank 0 writes it to fd), or -1.
int rank_main(const Options &o, const ibex_unique_id_t &id, int rank, size_t bytes, bool gpu, bool blocking, int fd) {
    setenv("IBEX_SHM", "0", 1);
    setenv("IBEX_DEVICE", "udp:lo", 1);
    ibex::cuda::simulated::set_copy_engine(o.gbps * 1000, o.latency_us, !o.timing_only);
    const size_t n = bytes / 4;
    std::vector<float> hsend(n, 1.0f), hrecv(n);
    SimBuffer dsend(n), drecv(n);
    if (gpu && (!dsend.view || !drecv.view)) return 1;
    void *send = gpu ? dsend.view : hsend.data();
    void *recv = gpu ? drecv.view : hrecv.data();
    ibex_comm_t *comm = nullptr;
    if (!check(ibex_comm_init_rank(&comm, o.nranks, &id, rank, nullptr), "init")) return 1;
    auto run = [&](int count) {
        std::vector<ibex_request_t *> reqs(static_cast<size_t>(count));
        for (int i = 0; i < count; ++i) {
            if (!check(ibex_allreduce(send, recv, n, IBEX_F32, IBEX_SUM, comm, blocking ? nullptr : &reqs[i]),
                       "allreduce"))
                return false;
        }
        if (!blocking)
            for (ibex_request_t *r : reqs)
                if (!check(ibex_wait(r), "wait")) return false;
        return true;
    };
    if (!run(o.warmup) || !check(ibex_barrier(comm, nullptr), "barrier")) return 1;
    const auto start = std::chrono::steady_clock::now();
    if (!run(o.iters)) return 1;
    double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count() / o.iters;
    // The slowest rank's time, as nccl-tests reports.
    if (!check(ibex_allreduce(&us, &us, 1, IBEX_F64, IBEX_MAX, comm, nullptr), "time")) return 1;
    const float want = static_cast<float>(o.nranks);
    const float *out = gpu ? drecv.backing.data() : hrecv.data();
    for (size_t i = 0; i < n && !(gpu && o.timing_only); i += 997)
        if (out[i] != want) {
            std::fprintf(stderr, "ibex_bench_staging_model: rank %d: [%zu] = %g, want %g\n", rank, i, out[i], want);
            return 1;
        }
    if (!check(ibex_comm_destroy(comm), "destroy")) return 1;
    if (rank == 0 && write(fd, &us, sizeof us) != sizeof us) return 1;
    return 0;
}

// Microseconds per op of one configuration, or a negative number when a rank failed.
double measure(const Options &o, size_t bytes, bool gpu, bool blocking) {
    ibex_unique_id_t id{};
    if (!check(ibex_get_unique_id(&id), "unique id")) return -1;
    int fds[2];
    if (pipe(fds) != 0) return -1;
    std::vector<pid_t> kids;
    for (int r = 0; r < o.nranks; ++r) {
        const pid_t p = fork();
        if (p == 0) {
            close(fds[0]);
            alarm(120); // a hung rank dies rather than hangs the benchmark
            _exit(rank_main(o, id, r, bytes, gpu, blocking, fds[1]));
        }
        if (p > 0) kids.push_back(p);
    }
    close(fds[1]);
    double us = -1;
    if (read(fds[0], &us, sizeof us) != sizeof us) us = -1;
    close(fds[0]);
    for (pid_t p : kids) {
        int status = 0;
        waitpid(p, &status, 0);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) us = -1;
    }
    return us;
}

void usage() {
    std::printf("usage: ibex_bench_staging_model [-np N] [-b BYTES[,BYTES...]] [--gbps G] [--latency-us U]\n"
                "                                [-n ITERS] [-w WARMUP] [--reps R] [--timing-only]\n"
                "  defaults: -np 2, -b 1048576,4194304,16777216, --gbps 25, --latency-us 10, -n 20, -w 3, --reps 3\n");
}

bool parse(int argc, char **argv, Options *o) {
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "-h" || a == "--help") return usage(), false;
        if (a == "--timing-only") {
            o->timing_only = true;
            continue;
        }
        if (i + 1 >= argc) return usage(), false;
        const char *v = argv[++i];
        if (a == "-np") o->nranks = std::atoi(v);
        else if (a == "-n") o->iters = std::atoi(v);
        else if (a == "-w") o->warmup = std::atoi(v);
        else if (a == "--reps") o->reps = std::atoi(v);
        else if (a == "--gbps") o->gbps = std::atof(v);
        else if (a == "--latency-us") o->latency_us = std::atof(v);
        else if (a == "-b") {
            o->sizes.clear();
            for (const char *p = v; *p;) {
                char *end = nullptr;
                o->sizes.push_back(std::strtoull(p, &end, 10));
                p = *end == ',' ? end + 1 : end;
                if (end == p && *p) return usage(), false;
            }
        } else {
            return usage(), false;
        }
    }
    if (o->nranks < 2 || o->iters < 1 || o->reps < 1 || o->gbps <= 0 || o->latency_us < 0) return usage(), false;
    return true;
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

} // namespace

int main(int argc, char **argv) {
    Options o;
    if (!parse(argc, argv, &o)) return 2;
    std::printf("# staged allreduce over udp:lo, %d ranks, simulated GPU buffers, copy engine model %.3g GB/s + %.3g us "
                "per copy%s; busbw GB/s, median of %d runs (spread max-min)\n",
                o.nranks, o.gbps, o.latency_us, o.timing_only ? " (timing only: bytes not moved)" : "", o.reps);
    std::printf("# %10s %2s %18s %18s %7s\n", "bytes", "z", "host", "simulated GPU", "GPU/host");
    const double factor = 2.0 * (o.nranks - 1) / o.nranks;
    int failed = 0;
    for (size_t bytes : o.sizes)
        for (bool blocking : {false, true}) {
            std::vector<double> host, gpu;
            for (int r = 0; r < o.reps; ++r) {
                // Alternated, so that drift on a shared host hits both alike.
                for (bool on_gpu : {false, true}) {
                    const double us = measure(o, bytes, on_gpu, blocking);
                    if (us <= 0) {
                        ++failed;
                        continue;
                    }
                    (on_gpu ? gpu : host).push_back(static_cast<double>(bytes) * factor / us / 1000);
                }
            }
            if (host.empty() || gpu.empty()) {
                std::printf("  %10zu %2d   (a run failed)\n", bytes, blocking);
                continue;
            }
            auto spread = [](const std::vector<double> &v) { return *std::max_element(v.begin(), v.end()) - *std::min_element(v.begin(), v.end()); };
            std::printf("  %10zu %2d %10.3f (%5.3f) %10.3f (%5.3f) %7.2f\n", bytes, blocking, median(host), spread(host),
                        median(gpu), spread(gpu), median(gpu) / median(host));
            std::fflush(stdout);
        }
    return failed ? 1 : 0;
}
