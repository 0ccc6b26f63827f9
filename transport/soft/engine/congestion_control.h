// Congestion control in the soft engine. Per QP the engine runs two controllers, both
// behind the CongestionControl interface of congestion/cc.h: the requester's send window
// (congestion/window, always) and DCQCN (congestion/dcqcn, when the context runs it) with
// the pacer that holds the QP's requests to the rate DCQCN names. Here too is DCQCN's
// configuration (context attribute, IBEX_DCQCN and IBEX_DCQCN_<knob>). The engine calls
// these hooks with the context lock held and passes the time; nothing here reads a clock.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <ibex/ibex.h>

#include "congestion/cc.h"
#include "congestion/dcqcn/params.h"
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

// One controller as the engine drives it: the interface and what it last answered. The
// engine acts on `last` and ticks the controller when the wake time it named has come.
struct Controller {
    std::unique_ptr<cc::CongestionControl> control;
    cc::Actions last;

    Controller() = default;
    explicit Controller(std::unique_ptr<cc::CongestionControl> c) : control(std::move(c)) {}
    const cc::Actions &update(uint64_t now, const cc::Event &ev) { return last = control->update(now, ev); }
    bool due(uint64_t now) const { return last.wake_ns && last.wake_ns <= now; }
    void tick(uint64_t now) {
        if (due(now)) update(now, {cc::EventType::kTick});
    }
};

// The send window of a QP: `max_inflight` (IBEX_MAX_INFLIGHT) for the QP, and an even
// share of `max_inflight_context` (IBEX_MAX_INFLIGHT_CONTEXT) among the context's busy QPs.
Controller make_send_window(uint32_t max_inflight, uint32_t max_inflight_context);

// DCQCN for one QP: the reaction point sets the pacer's rate, the notification point
// answers CE marks with CNPs.
struct QpRate {
    explicit QpRate(const RateControlConfig &c);
    Controller controller;
    cc::Pacer pacer;
    const cc::Actions &update(uint64_t now, const cc::Event &ev) {
        const cc::Actions &a = controller.update(now, ev);
        follow(a);
        return a;
    }
    void follow(const cc::Actions &a) {
        if (a.rate_mbps != pacer.rate_mbps()) pacer.set_rate(a.rate_mbps);
    }
};

// Each returns true when the QP has no rate control (nothing to hold back).
inline bool rate_may_send(const QpRate *r, uint64_t now) { return !r || r->pacer.ready(now); }

inline void rate_sent(QpRate *r, uint64_t now, uint32_t bytes) {
    if (!r) return;
    r->pacer.sent(now, bytes);
    r->update(now, {cc::EventType::kTxBytes, bytes});
}

inline void rate_tick(QpRate *r, uint64_t now) {
    if (r && r->controller.due(now)) r->update(now, {cc::EventType::kTick});
}

ibex_status_t query_qp_cc(ibex_qp *qp, ibex_qp_cc_t *out);

} // namespace ibex::soft
