#include "runtime/base/simulated_device.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <deque>
#include <mutex>

namespace ibex::cuda::simulated {
namespace {

struct Range {
    uintptr_t base = 0;
    size_t bytes = 0;
    uint8_t *backing = nullptr;
};

constexpr int kMaxRanges = 16;
Range g_ranges[kMaxRanges];
std::atomic<int> g_count{0}; // ranges [0, g_count) are published
std::mutex g_mutex;          // writers

// Deferred copies, in queue order; fence 0 = not fenced yet.
struct Copy {
    void *dst;
    const void *src;
    size_t bytes;
    uint64_t fence;
    int queries;
    int64_t done_ns; // the copy engine's model: when the copy has landed
};
std::mutex g_copy_mutex;
std::deque<Copy> g_copies;
int g_defer = 0;
uint64_t g_next_fence = 0;
double g_bytes_per_ns = 0; // the copy engine's model (0: off)
int64_t g_latency_ns = 0;
int64_t g_engine_free_ns = 0;
bool g_move_bytes = true;

int64_t now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

// Performs the queued copies up to and including fence id (every one for ~0).
void perform_locked(uint64_t id) {
    while (!g_copies.empty() && g_copies.front().fence && g_copies.front().fence <= id) {
        const Copy &c = g_copies.front();
        if (g_move_bytes) std::memmove(c.dst, c.src, c.bytes);
        g_copies.pop_front();
    }
}

} // namespace

void set_deferred_copies(int queries) {
    std::lock_guard<std::mutex> l(g_copy_mutex);
    g_defer = queries;
}

void set_copy_engine(double bytes_per_us, double latency_us, bool move_bytes) {
    std::lock_guard<std::mutex> l(g_copy_mutex);
    g_move_bytes = move_bytes || bytes_per_us <= 0;
    g_bytes_per_ns = bytes_per_us > 0 ? bytes_per_us / 1000 : 0;
    g_latency_ns = static_cast<int64_t>(latency_us * 1000);
    g_engine_free_ns = 0;
}

bool defer_copy(void *dst, const void *src, size_t bytes) {
    std::lock_guard<std::mutex> l(g_copy_mutex);
    if (g_bytes_per_ns > 0) {
        const int64_t start = std::max(now_ns(), g_engine_free_ns) + g_latency_ns;
        g_engine_free_ns = start + static_cast<int64_t>(static_cast<double>(bytes) / g_bytes_per_ns);
        g_copies.push_back({dst, src, bytes, 0, 0, g_engine_free_ns});
        return true;
    }
    if (g_defer <= 0) return false;
    g_copies.push_back({dst, src, bytes, 0, 0, 0});
    return true;
}

uint64_t fence() {
    std::lock_guard<std::mutex> l(g_copy_mutex);
    if (g_copies.empty() || g_copies.back().fence) return 0;
    const uint64_t id = ++g_next_fence;
    for (auto it = g_copies.rbegin(); it != g_copies.rend() && !it->fence; ++it) it->fence = id;
    return id;
}

bool fence_done(uint64_t id) {
    if (!id) return true;
    std::lock_guard<std::mutex> l(g_copy_mutex);
    if (g_bytes_per_ns > 0) {
        // The fence's last copy lands last.
        int64_t landed = 0;
        for (const Copy &c : g_copies)
            if (c.fence == id) landed = c.done_ns;
        if (landed > now_ns()) return false;
        perform_locked(id);
        return true;
    }
    for (Copy &c : g_copies) {
        if (c.fence != id) continue;
        if (++c.queries < g_defer) return false;
        break;
    }
    perform_locked(id);
    return true;
}

void drop(uint64_t id) {
    std::lock_guard<std::mutex> l(g_copy_mutex);
    perform_locked(id);
}

void finish_all() {
    std::lock_guard<std::mutex> l(g_copy_mutex);
    for (Copy &c : g_copies)
        if (g_move_bytes) std::memmove(c.dst, c.src, c.bytes);
    g_copies.clear();
}

bool add_range(void *view, size_t bytes, void *backing) {
    std::lock_guard<std::mutex> l(g_mutex);
    const int n = g_count.load(std::memory_order_relaxed);
    for (int i = 0; i < n; ++i) {
        if (g_ranges[i].bytes) continue; // a removed range's slot
        g_ranges[i].base = reinterpret_cast<uintptr_t>(view);
        g_ranges[i].backing = static_cast<uint8_t *>(backing);
        std::atomic_thread_fence(std::memory_order_release);
        g_ranges[i].bytes = bytes;
        return true;
    }
    if (n == kMaxRanges) return false;
    g_ranges[n] = {reinterpret_cast<uintptr_t>(view), bytes, static_cast<uint8_t *>(backing)};
    g_count.store(n + 1, std::memory_order_release);
    return true;
}

void remove_range(void *view) {
    std::lock_guard<std::mutex> l(g_mutex);
    for (int i = 0, n = g_count.load(std::memory_order_relaxed); i < n; ++i)
        if (g_ranges[i].base == reinterpret_cast<uintptr_t>(view)) g_ranges[i].bytes = 0;
}

void clear() {
    std::lock_guard<std::mutex> l(g_mutex);
    g_count.store(0, std::memory_order_release);
}

bool any() { return g_count.load(std::memory_order_relaxed) > 0; }

uint8_t *backing(const void *p) {
    const uintptr_t a = reinterpret_cast<uintptr_t>(p);
    for (int i = 0, n = g_count.load(std::memory_order_acquire); i < n; ++i)
        if (a >= g_ranges[i].base && a - g_ranges[i].base < g_ranges[i].bytes)
            return g_ranges[i].backing + (a - g_ranges[i].base);
    return nullptr;
}

} // namespace ibex::cuda::simulated
