// Where an op of several steps spends its time: each step's mean time over the ops, in
// one line to stderr when the communicator closes. Switched on by an environment variable
// (IBEX_GPU_DIRECT_PROFILE for the mapped GPU collectives, IBEX_GPU_STAGING_PROFILE for
// the staged ones); off, lap() is one branch and nothing else runs.
#pragma once

#include <cstdint>
#include <initializer_list>

namespace ibex::coll {

class StepProfile {
public:
    static constexpr int kMaxSteps = 8;

    // On where the variable `env` is 1; the steps' names, in order (at most kMaxSteps,
    // string literals). Forgets what was timed before.
    void start(const char *env, std::initializer_list<const char *> steps);
    bool on() const { return on_; }
    // The time since the last lap is step's (a step below 0 only sets the mark).
    void lap(int step) {
        if (on_) lap_on(step);
    }
    // One more op for the means.
    void op_done() {
        if (on_) ++ops_;
    }
    // "ibex <what> profile, rank <rank>: <ops> ops<extra>, mean us: <step> <mean> ...", as
    // one write(2) so that ranks sharing a pipe do not cut into each other's lines; then
    // the counts start again. Nothing when off or when no op finished.
    void report(const char *what, int rank, const char *extra = "");

private:
    void lap_on(int step);

    bool on_ = false;
    int nsteps_ = 0;
    const char *names_[kMaxSteps] = {};
    uint64_t ops_ = 0;
    int64_t mark_ns_ = 0;
    int64_t step_ns_[kMaxSteps] = {};
};

} // namespace ibex::coll
