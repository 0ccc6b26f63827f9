#include "runtime/tuning/dcqcn_knobs.h"

namespace ibex::tuning {
namespace {

// Rates are Mbit/s up to 800G line rate; times are microseconds.
constexpr KnobInfo kKnobs[kKnobCount] = {
    {Knob::rpg_time_reset, "rpg_time_reset", "roce_rp", 1, 131071, "us"},
    {Knob::rpg_byte_reset, "rpg_byte_reset", "roce_rp", 0, 32767, "byte units, 0 = off"},
    {Knob::rpg_ai_rate, "rpg_ai_rate", "roce_rp", 1, 800000, "Mbit/s"},
    {Knob::rpg_hai_rate, "rpg_hai_rate", "roce_rp", 1, 800000, "Mbit/s"},
    {Knob::rpg_gd, "rpg_gd", "roce_rp", 1, 15, "log2 divisor"},
    {Knob::rpg_min_dec_fac, "rpg_min_dec_fac", "roce_rp", 1, 100, "percent"},
    {Knob::rpg_min_rate, "rpg_min_rate", "roce_rp", 0, 800000, "Mbit/s"},
    {Knob::initial_alpha_value, "initial_alpha_value", "roce_rp", 0, 1023, "alpha x 1024"},
    {Knob::dce_tcp_g, "dce_tcp_g", "roce_rp", 0, 1023, "1024 x (1 - g)"},
    {Knob::dce_tcp_rtt, "dce_tcp_rtt", "roce_rp", 1, 131071, "us"},
    {Knob::rpg_threshold, "rpg_threshold", "roce_rp", 1, 31, "F, stages"},
    {Knob::min_time_between_cnps, "min_time_between_cnps", "roce_np", 0, 4095, "us"},
    {Knob::cnp_dscp, "cnp_dscp", "roce_np", 0, 63, "DSCP"},
    {Knob::cnp_802p_prio, "cnp_802p_prio", "roce_np", 0, 7, "802.1p priority"},
};

void set(KnobValues &v, Knob k, int64_t x) { v[static_cast<size_t>(k)] = x; }

} // namespace

std::span<const KnobInfo> knob_table() { return kKnobs; }

const KnobInfo *find_knob(std::string_view name) {
    for (const KnobInfo &k : kKnobs)
        if (k.name == name) return &k;
    return nullptr;
}

const KnobInfo &knob_info(Knob k) { return kKnobs[static_cast<size_t>(k)]; }

std::string_view profile_names() { return "paper, mlx5, none"; }

bool profile_values(std::string_view profile, KnobValues &out) {
    out = {};
    if (profile == "none") return true;
    if (profile == "paper") {
        // Zhu et al., SIGCOMM 2015. B = 10 MB does not fit the firmware's 15-bit byte
        // counter, so the largest value stands in for it; R_HAI and the cut limit are not
        // given by the paper and are left to the NIC.
        set(out, Knob::min_time_between_cnps, 50);
        set(out, Knob::dce_tcp_rtt, 55);
        set(out, Knob::dce_tcp_g, 1020); // g = 1/256
        set(out, Knob::rpg_time_reset, 55);
        set(out, Knob::rpg_byte_reset, 32767);
        set(out, Knob::rpg_threshold, 5);
        set(out, Knob::rpg_ai_rate, 40);
        set(out, Knob::initial_alpha_value, 1023); // alpha = 1
        set(out, Knob::cnp_dscp, 48);
        return true;
    }
    if (profile == "mlx5") {
        // The ConnectX firmware defaults, to undo experiments. min_time_between_cnps and
        // rpg_gd differ between firmware generations and are left alone.
        set(out, Knob::dce_tcp_rtt, 1);
        set(out, Knob::dce_tcp_g, 1019);
        set(out, Knob::rpg_time_reset, 300);
        set(out, Knob::rpg_byte_reset, 32767);
        set(out, Knob::rpg_threshold, 1);
        set(out, Knob::rpg_ai_rate, 5);
        set(out, Knob::rpg_hai_rate, 50);
        set(out, Knob::rpg_min_dec_fac, 50);
        set(out, Knob::rpg_min_rate, 1);
        set(out, Knob::initial_alpha_value, 1023);
        set(out, Knob::cnp_dscp, 48);
        return true;
    }
    return false;
}

} // namespace ibex::tuning
