#include "congestion/dcqcn/reaction_point.h"

#include <algorithm>

namespace ibex::cc::dcqcn {

namespace {
// Timer expiries run per advance() call: enough to recover fully from any cut (with
// F = 5 the rate is back at line rate within a few hundred events); a flow idle for
// longer skips the rest, which only leaves alpha higher than a NIC would.
constexpr int kMaxTimerEvents = 4096;
} // namespace

ReactionPoint::ReactionPoint(const Params &p)
    : p_(p), rc_(p.line_rate_mbps), rt_(p.line_rate_mbps), alpha_(p.initial_alpha) {}

uint64_t ReactionPoint::next_event_ns() const { return limited_ ? std::min(alpha_next_, rate_next_) : 0; }

void ReactionPoint::on_cnp(uint64_t now) {
    advance(now);
    ++cnps_;
    limited_ = true;
    rt_ = rc_;
    const double cut = alpha_ * 1024.0 / double(uint64_t(1) << p_.gd_shift);
    const double keep = std::max(1.0 - cut, p_.min_dec_fraction);
    rc_ = std::max(p_.min_rate_mbps, rc_ * keep);
    alpha_ = (1 - p_.g) * alpha_ + p_.g;
    t_ = bc_ = 0;
    bytes_ = 0;
    alpha_next_ = now + p_.alpha_timer_ns;
    rate_next_ = now + p_.rate_timer_ns;
}

void ReactionPoint::on_bytes(uint64_t now, uint64_t bytes) {
    advance(now);
    if (!limited_ || p_.byte_counter == 0) return;
    bytes_ += bytes;
    for (int i = 0; i < kMaxTimerEvents && bytes_ >= p_.byte_counter; ++i) {
        bytes_ -= p_.byte_counter;
        increase(Source::kBytes);
    }
}

void ReactionPoint::advance(uint64_t now) {
    if (!limited_) return;
    for (int i = 0; i < kMaxTimerEvents; ++i) {
        const uint64_t next = std::min(alpha_next_, rate_next_);
        if (next > now) return;
        if (alpha_next_ == next) {
            alpha_ = (1 - p_.g) * alpha_;
            alpha_next_ += p_.alpha_timer_ns;
        } else {
            increase(Source::kTimer);
            rate_next_ += p_.rate_timer_ns;
        }
    }
    if (alpha_next_ <= now) alpha_next_ = now + p_.alpha_timer_ns;
    if (rate_next_ <= now) rate_next_ = now + p_.rate_timer_ns;
}

void ReactionPoint::increase(Source s) {
    const unsigned lo = std::min(t_, bc_), hi = std::max(t_, bc_);
    const unsigned f = p_.threshold;
    if (p_.byte_counter == 0 ? t_ >= f : hi >= f) {
        if (p_.byte_counter != 0 && lo >= f)
            rt_ += p_.hai_mbps * double(lo - f + 1);
        else
            rt_ += p_.ai_mbps;
    }
    rt_ = std::min(rt_, p_.line_rate_mbps);
    rc_ = std::min((rt_ + rc_) / 2, p_.line_rate_mbps);
    if (s == Source::kTimer)
        ++t_;
    else
        ++bc_;
}

} // namespace ibex::cc::dcqcn
