// Time stamps for the latency loops. perftest stamps with the cycle counter; a clock read
// costs 20-40 ns on a VM, which is a third of a shared-memory half round trip, so a
// stamp taken while the peer answers can still spill onto the measured path. Ticks are
// recorded raw and turned into nanoseconds once, scaled by the steady clock over the
// same run, so no CPU frequency is assumed. Without an invariant TSC the ticks are the
// steady clock itself.
#pragma once

#include <cstdint>
#include <vector>

#if defined(__x86_64__)
#include <cpuid.h>
#include <x86intrin.h>
#endif

#include "tools/ibex_perftest/session.h"

namespace ibex::perftest {

class TickClock {
public:
    TickClock() : cycles_(invariant_tsc()), start_ns_(now_ns()), start_ticks_(read()) {}

    uint64_t read() const {
#if defined(__x86_64__)
        if (cycles_) return __rdtsc();
#endif
        return now_ns();
    }

    // Rewrites stamps taken with read() as steady-clock nanoseconds.
    void to_ns(std::vector<uint64_t> &stamps) const {
        if (!cycles_) return;
        const uint64_t end_ticks = read(), end_ns = now_ns();
        const double ns_per_tick =
            end_ticks > start_ticks_ ? double(end_ns - start_ns_) / double(end_ticks - start_ticks_) : 1.0;
        for (uint64_t &s : stamps) s = start_ns_ + static_cast<uint64_t>(double(s - start_ticks_) * ns_per_tick);
    }

private:
    static bool invariant_tsc() {
#if defined(__x86_64__)
        unsigned a = 0, b = 0, c = 0, d = 0;
        return __get_cpuid(0x80000007u, &a, &b, &c, &d) && (d & (1u << 8));
#else
        return false;
#endif
    }

    bool cycles_;
    uint64_t start_ns_, start_ticks_;
};

} // namespace ibex::perftest
