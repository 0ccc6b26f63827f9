// DCQCN reaction point (the sender side of one flow), after Zhu et al., SIGCOMM 2015,
// with the cut and floor of the mlx5 knobs (params.h):
//   CNP:  Rt = Rc; Rc = max(Rmin, Rc * max(1 - alpha*1024/2^rpg_gd, rpg_min_dec_fac));
//         alpha = (1 - g) alpha + g; stage counts, byte counter and both timers restart.
//   every tau' without a CNP: alpha = (1 - g) alpha.
//   every T (timer) and every B bytes sent (byte counter) since the last CNP, an increase
//   event; with t and b the number of earlier timer and byte-counter events:
//     max(t, b) < F: fast recovery, Rc = (Rt + Rc) / 2
//     min(t, b) >= F: hyper increase, Rt += R_HAI * (min(t, b) - F + 1), Rc = (Rt + Rc) / 2
//     otherwise: additive increase, Rt += R_AI, Rc = (Rt + Rc) / 2
//   Rt and Rc never exceed the line rate.
// A flow starts at line rate with alpha = initial_alpha_value; its timers run from its
// first CNP on (before that there is nothing to recover from).
#pragma once

#include <cstdint>

#include "congestion/dcqcn/params.h"

namespace ibex::cc::dcqcn {

class ReactionPoint {
public:
    explicit ReactionPoint(const Params &p);

    void on_cnp(uint64_t now);
    void on_bytes(uint64_t now, uint64_t bytes);
    void advance(uint64_t now); // runs the timers that expired by `now`, in time order

    double rate_mbps() const { return rc_; }
    double target_mbps() const { return rt_; }
    double alpha() const { return alpha_; }
    uint64_t cnps_handled() const { return cnps_; }
    unsigned timer_stage() const { return t_; }
    unsigned byte_stage() const { return bc_; }
    uint64_t next_event_ns() const; // 0 before the first CNP
    const Params &params() const { return p_; }

private:
    enum class Source { kTimer, kBytes };
    void increase(Source s);

    Params p_;
    double rc_;
    double rt_;
    double alpha_;
    bool limited_ = false; // a CNP arrived at least once
    uint64_t alpha_next_ = 0;
    uint64_t rate_next_ = 0;
    uint64_t bytes_ = 0; // since the last byte-counter event
    unsigned t_ = 0;
    unsigned bc_ = 0;
    uint64_t cnps_ = 0;
};

} // namespace ibex::cc::dcqcn
