#include "congestion/dcqcn/params.h"

namespace ibex::cc::dcqcn {

bool params_from_knobs(const KnobValues &v, Params &p, std::string &err) {
    for (const KnobInfo &k : knob_table()) {
        const auto &x = at(v, k.knob);
        if (x && (*x < k.min || *x > k.model_max)) {
            err = std::string(k.name) + " = " + std::to_string(*x) + " is outside [" + std::to_string(k.min) + ", " +
                  std::to_string(k.model_max) + "]";
            return false;
        }
    }
    auto get = [&](Knob k, auto &dst, auto convert) {
        if (const auto &x = at(v, k)) dst = convert(*x);
    };
    const auto us = [](int64_t x) { return uint64_t(x) * 1000; };
    const auto mbps = [](int64_t x) { return double(x); };
    get(Knob::rpg_time_reset, p.rate_timer_ns, us);
    get(Knob::rpg_byte_reset, p.byte_counter, [](int64_t x) { return uint64_t(x); });
    get(Knob::rpg_ai_rate, p.ai_mbps, mbps);
    get(Knob::rpg_hai_rate, p.hai_mbps, mbps);
    get(Knob::rpg_gd, p.gd_shift, [](int64_t x) { return unsigned(x); });
    get(Knob::rpg_min_dec_fac, p.min_dec_fraction, [](int64_t x) { return double(x) / 100; });
    get(Knob::rpg_min_rate, p.min_rate_mbps, mbps);
    get(Knob::initial_alpha_value, p.initial_alpha, [](int64_t x) { return double(x) / 1024; });
    get(Knob::dce_tcp_g, p.g, [](int64_t x) { return double(1024 - x) / 1024; });
    get(Knob::dce_tcp_rtt, p.alpha_timer_ns, us);
    get(Knob::rpg_threshold, p.threshold, [](int64_t x) { return unsigned(x); });
    get(Knob::min_time_between_cnps, p.cnp_interval_ns, us);
    get(Knob::cnp_dscp, p.cnp_dscp, [](int64_t x) { return uint8_t(x); });
    return true;
}

bool preset_params(std::string_view profile, double line_rate_mbps, Params &out) {
    KnobValues v;
    if (!model_values(profile, v)) return false;
    out = Params{};
    out.line_rate_mbps = line_rate_mbps;
    std::string err;
    return params_from_knobs(v, out, err);
}

} // namespace ibex::cc::dcqcn
