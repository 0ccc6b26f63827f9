#include "allreduce/step_profile.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>

#include "runtime/base/config.h"

namespace ibex::coll {

void StepProfile::start(const char *env, std::initializer_list<const char *> steps) {
    *this = StepProfile{};
    on_ = config::get_int(env, 0, 0, 1) != 0;
    for (const char *s : steps)
        if (nsteps_ < kMaxSteps) names_[nsteps_++] = s;
}

void StepProfile::lap_on(int step) {
    const int64_t t =
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
    if (step >= 0 && step < nsteps_) step_ns_[step] += t - mark_ns_;
    mark_ns_ = t;
}

void StepProfile::report(const char *what, int rank, const char *extra) {
    if (!on_ || !ops_) return;
    char line[512];
    int at = std::snprintf(line, sizeof line, "ibex %s profile, rank %d: %llu ops%s, mean us:", what, rank,
                           static_cast<unsigned long long>(ops_), extra);
    for (int k = 0; k < nsteps_ && at > 0 && static_cast<size_t>(at) < sizeof line; ++k)
        at += std::snprintf(line + at, sizeof line - static_cast<size_t>(at), " %s %.1f", names_[k],
                            static_cast<double>(step_ns_[k]) / 1e3 / static_cast<double>(ops_));
    const size_t len = std::min(std::strlen(line), sizeof line - 2);
    line[len] = '\n';
    [[maybe_unused]] ssize_t w = ::write(2, line, len + 1);
    ops_ = 0;
    std::fill(std::begin(step_ns_), std::end(step_ns_), 0);
}

} // namespace ibex::coll
