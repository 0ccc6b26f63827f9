#include "congestion/red.h"

namespace ibex::cc {

double mark_probability(const RedParams &p, uint64_t q) {
    if (q <= p.kmin_bytes) return 0;
    if (q > p.kmax_bytes) return 1;
    if (p.kmax_bytes == p.kmin_bytes) return 1;
    return double(q - p.kmin_bytes) / double(p.kmax_bytes - p.kmin_bytes) * p.pmax;
}

double RedMarker::uniform() {
    // xorshift64*: cheap, and good enough for a coin with probability >= 1e-6.
    state_ ^= state_ >> 12;
    state_ ^= state_ << 25;
    state_ ^= state_ >> 27;
    return double((state_ * 0x2545F4914F6CDD1Dull) >> 11) * 0x1.0p-53;
}

bool RedMarker::mark(uint64_t q) {
    const double pr = mark_probability(p_, q);
    if (pr <= 0) return false;
    if (pr >= 1) return true;
    return uniform() < pr;
}

} // namespace ibex::cc
