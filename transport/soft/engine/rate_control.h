// DCQCN in the soft engine: the context's configuration (context attribute, IBEX_DCQCN and
// IBEX_DCQCN_<knob>), and per QP the DCQCN state machine (congestion/dcqcn) plus the pacer
// that holds the QP's requests to the rate it names. The engine calls these hooks with
// the context lock held and passes the time; nothing here reads a clock.
#pragma once

#include <cstdint>
#include <string>

#include <ibex/ibex.h>

#include "congestion/dcqcn/dcqcn.h"
#include "congestion/pacer.h"

namespace ibex::soft {

struct RateControlConfig {
    bool enabled = false;
    std::string profile = "off";
    cc::dcqcn::Params params;
    // How far a QP that was not scheduled may catch up at once (IBEX_DCQCN_BURST_US): long
    // enough to ride out the progress thread's wake-up latency on a busy host (a
    // sched_yield there costs a round of every other runnable thread, often a
    // millisecond), short enough not to send a window at once.
    uint64_t burst_ns = 1'000'000;
};

// `profile` NULL: IBEX_DCQCN (off, paper or mlx5; default off). `line_rate_mbps` 0:
// IBEX_DCQCN_LINE_RATE (Mbit/s, default 10000), where each QP starts. Then every
// IBEX_DCQCN_<knob> set in the environment overrides the preset. False (status set by
// fail()) for an unknown profile or a knob out of range.
bool rate_control_config(const char *profile, uint32_t line_rate_mbps, RateControlConfig &out, ibex_status_t *st);

struct QpRate {
    explicit QpRate(const RateControlConfig &c) : dcqcn(c.params) {
        pacer.set_rate(c.params.line_rate_mbps);
        pacer.set_burst(c.burst_ns);
    }
    cc::dcqcn::Dcqcn dcqcn;
    cc::Pacer pacer;
    void apply(const cc::Actions &a) {
        if (a.rate_mbps != pacer.rate_mbps()) pacer.set_rate(a.rate_mbps);
    }
};

// Each returns true when the QP has no rate control (nothing to hold back).
inline bool rate_may_send(const QpRate *r, uint64_t now) { return !r || r->pacer.ready(now); }

inline void rate_sent(QpRate *r, uint64_t now, uint32_t bytes) {
    if (!r) return;
    r->pacer.sent(now, bytes);
    r->apply(r->dcqcn.update(now, {cc::EventType::kTxBytes, bytes}));
}

inline void rate_tick(QpRate *r, uint64_t now) {
    if (r && r->dcqcn.rp().next_event_ns() && r->dcqcn.rp().next_event_ns() <= now)
        r->apply(r->dcqcn.update(now, {cc::EventType::kTick}));
}

ibex_status_t query_qp_cc(ibex_qp *qp, ibex_qp_cc_t *out);

} // namespace ibex::soft
