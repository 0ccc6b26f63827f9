// The congestion point's marking model (RED on the instantaneous egress queue, as
// DCQCN's switches are configured): no marks up to Kmin, probability rising linearly to
// Pmax at Kmax, every packet above Kmax.
#pragma once

#include <cstdint>

namespace ibex::cc {

struct RedParams {
    uint64_t kmin_bytes = 5 * 1024; // DCQCN paper: 5 KB, 200 KB, 1%
    uint64_t kmax_bytes = 200 * 1024;
    double pmax = 0.01;
};

double mark_probability(const RedParams &p, uint64_t queue_bytes);

// Draws the marking decision from its own generator, so a run is repeatable by seed.
class RedMarker {
public:
    explicit RedMarker(const RedParams &p, uint64_t seed = 1) : p_(p), state_(seed ? seed : 1) {}
    bool mark(uint64_t queue_bytes);
    const RedParams &params() const { return p_; }

private:
    double uniform();
    RedParams p_;
    uint64_t state_;
};

} // namespace ibex::cc
