// The ceilings of an intra-host transfer, for bench/shm/run_shm_bench.sh:
//   ibex_shm_limits memcpy BYTES ITERS    memcpy of one cache-hot buffer into another
//   ibex_shm_limits cma BYTES ITERS       process_vm_writev of BYTES into a forked child
//   ibex_shm_limits pingpong BYTES ITERS  two processes storing BYTES into each other's
//                                         shared page and spinning on its last byte
// Prints "<mode> <bytes> <MiB/s>" (2^20 bytes per MiB, as the perftest tools), or for
// pingpong "pingpong <bytes> <us>": half the round trip, the median over blocks of 1000
// round trips (a block's mean: no clock read inside the loop, which would cost a
// third of the figure).
#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

namespace {

void *page_buffer(size_t n) {
    void *p = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        std::perror("mmap");
        std::exit(1);
    }
    std::memset(p, 1, n); // touched: no page faults inside the timed loop
    return p;
}

double mib_per_s(size_t bytes, long iters, std::chrono::steady_clock::duration d) {
    return double(bytes) * double(iters) / (1024.0 * 1024.0) / std::chrono::duration<double>(d).count();
}

int run_memcpy(size_t bytes, long iters) {
    auto *src = static_cast<uint8_t *>(page_buffer(bytes));
    auto *dst = static_cast<uint8_t *>(page_buffer(bytes));
    std::memcpy(dst, src, bytes); // warm
    const auto t0 = std::chrono::steady_clock::now();
    for (long i = 0; i < iters; ++i) {
        src[i % bytes] = static_cast<uint8_t>(i); // the copy cannot be hoisted
        std::memcpy(dst, src, bytes);
        asm volatile("" : : "r"(dst) : "memory");
    }
    std::printf("memcpy %zu %.2f\n", bytes, mib_per_s(bytes, iters, std::chrono::steady_clock::now() - t0));
    return 0;
}

int run_cma(size_t bytes, long iters) {
    int to_parent[2], to_child[2];
    if (pipe(to_parent) || pipe(to_child)) return 1;
    const pid_t child = fork();
    if (child == 0) {
        void *buf = page_buffer(bytes);
        const uintptr_t a = reinterpret_cast<uintptr_t>(buf);
        if (write(to_parent[1], &a, sizeof a) != sizeof a) _exit(1);
        char c;
        (void)!read(to_child[0], &c, 1); // until the parent is done
        _exit(0);
    }
    uintptr_t remote = 0;
    if (read(to_parent[0], &remote, sizeof remote) != sizeof remote) return 1;
    void *src = page_buffer(bytes);
    iovec l{src, bytes}, r{reinterpret_cast<void *>(remote), bytes};
    int rc = 0;
    if (process_vm_writev(child, &l, 1, &r, 1, 0) != ssize_t(bytes)) {
        std::perror("process_vm_writev");
        rc = 1;
    } else {
        const auto t0 = std::chrono::steady_clock::now();
        for (long i = 0; i < iters; ++i)
            if (process_vm_writev(child, &l, 1, &r, 1, 0) != ssize_t(bytes)) rc = 1;
        std::printf("cma %zu %.2f\n", bytes, mib_per_s(bytes, iters, std::chrono::steady_clock::now() - t0));
    }
    (void)!write(to_child[1], "x", 1);
    waitpid(child, nullptr, 0);
    return rc;
}

int run_pingpong(size_t bytes, long iters) {
    constexpr long kBlock = 1000;
    if (bytes > 2048) return 2;
    void *m = mmap(nullptr, 8192, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return 1;
    auto *to_child = static_cast<uint8_t *>(m), *to_parent = to_child + 4096;
    const long blocks = std::max(1L, iters / kBlock), n = blocks * kBlock;
    auto pass = [bytes](uint8_t *dst, const uint8_t *src, uint8_t mark) {
        std::memcpy(dst, src, bytes - 1);
        __atomic_store_n(dst + bytes - 1, mark, __ATOMIC_RELEASE);
    };
    auto wait_for = [bytes](const uint8_t *box, uint8_t mark) {
        // With the CPU's spin-wait hint, as ibex_write_lat waits (the better of the two here).
        while (__atomic_load_n(box + bytes - 1, __ATOMIC_ACQUIRE) != mark) {
#if defined(__x86_64__)
            __builtin_ia32_pause();
#endif
        }
    };
    const pid_t child = fork();
    if (child == 0) {
        uint8_t local[2048] = {};
        for (long i = 1; i <= n; ++i) {
            wait_for(to_child, static_cast<uint8_t>(i));
            pass(to_parent, local, static_cast<uint8_t>(i));
        }
        _exit(0);
    }
    uint8_t local[2048] = {};
    std::vector<double> half_us;
    for (long b = 0; b < blocks; ++b) {
        const auto t0 = std::chrono::steady_clock::now();
        for (long i = b * kBlock + 1; i <= (b + 1) * kBlock; ++i) {
            pass(to_child, local, static_cast<uint8_t>(i));
            wait_for(to_parent, static_cast<uint8_t>(i));
        }
        half_us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() /
                          kBlock / 2);
    }
    waitpid(child, nullptr, 0);
    std::sort(half_us.begin(), half_us.end());
    std::printf("pingpong %zu %.4f\n", bytes, half_us[half_us.size() / 2]);
    return 0;
}

} // namespace

int main(int argc, char **argv) {
    if (argc != 4) {
        std::fprintf(stderr, "usage: %s memcpy|cma|pingpong BYTES ITERS\n", argv[0]);
        return 2;
    }
    const std::string mode = argv[1];
    const size_t bytes = std::strtoull(argv[2], nullptr, 0);
    const long iters = std::strtol(argv[3], nullptr, 0);
    if (!bytes || iters <= 0) return 2;
    if (mode == "memcpy") return run_memcpy(bytes, iters);
    if (mode == "cma") return run_cma(bytes, iters);
    if (mode == "pingpong") return run_pingpong(bytes, iters);
    std::fprintf(stderr, "unknown mode %s\n", mode.c_str());
    return 2;
}
