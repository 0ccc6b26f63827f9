#include "runtime/base/simulated_device.h"

#include <atomic>
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

} // namespace

bool add_range(void *view, size_t bytes, void *backing) {
    std::lock_guard<std::mutex> l(g_mutex);
    const int n = g_count.load(std::memory_order_relaxed);
    if (n == kMaxRanges) return false;
    g_ranges[n] = {reinterpret_cast<uintptr_t>(view), bytes, static_cast<uint8_t *>(backing)};
    g_count.store(n + 1, std::memory_order_release);
    return true;
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
