#include "congestion/dcqcn/knobs.h"

#include <algorithm>

namespace ibex::cc::dcqcn {
namespace {

// Rates are Mbit/s up to 800G line rate; times are microseconds.
constexpr KnobInfo kKnobs[kKnobCount] = {
    {Knob::rpg_time_reset, "rpg_time_reset", "roce_rp", 1, 131071, "us", 131071},
    {Knob::rpg_byte_reset, "rpg_byte_reset", "roce_rp", 0, 32767, "byte units, 0 = off", int64_t(1) << 40},
    {Knob::rpg_ai_rate, "rpg_ai_rate", "roce_rp", 1, 800000, "Mbit/s", 800000},
    {Knob::rpg_hai_rate, "rpg_hai_rate", "roce_rp", 1, 800000, "Mbit/s", 800000},
    {Knob::rpg_gd, "rpg_gd", "roce_rp", 1, 15, "log2 divisor", 15},
    {Knob::rpg_min_dec_fac, "rpg_min_dec_fac", "roce_rp", 1, 100, "percent", 100},
    {Knob::rpg_min_rate, "rpg_min_rate", "roce_rp", 0, 800000, "Mbit/s", 800000},
    {Knob::initial_alpha_value, "initial_alpha_value", "roce_rp", 0, 1023, "alpha x 1024", 1023},
    {Knob::dce_tcp_g, "dce_tcp_g", "roce_rp", 0, 1023, "1024 x (1 - g)", 1023},
    {Knob::dce_tcp_rtt, "dce_tcp_rtt", "roce_rp", 1, 131071, "us", 131071},
    {Knob::rpg_threshold, "rpg_threshold", "roce_rp", 1, 31, "F, stages", 31},
    {Knob::min_time_between_cnps, "min_time_between_cnps", "roce_np", 0, 4095, "us", 4095},
    {Knob::cnp_dscp, "cnp_dscp", "roce_np", 0, 63, "DSCP", 63},
    {Knob::cnp_802p_prio, "cnp_802p_prio", "roce_np", 0, 7, "802.1p priority", 7},
};

// One preset entry. `nic` false: the source gives no value and the NIC keeps its own, but
// the software model needs one (README.md says where each fill comes from).
struct Entry {
    Knob knob;
    int64_t value;
    bool nic;
};

// Zhu et al., "Congestion Control for Large-Scale RDMA Deployments", SIGCOMM 2015:
// tau = 50 us between CNPs, tau' = 55 us alpha timer, T = 55 us, B = 10 MB, F = 5,
// R_AI = 40 Mbit/s, g = 1/256, alpha starts at 1. The paper cuts by alpha/2, which is
// rpg_gd = 11 on the firmware's alpha x 1024 scale and never more than half (50%).
constexpr Entry kPaper[] = {
    {Knob::min_time_between_cnps, 50, true},
    {Knob::dce_tcp_rtt, 55, true},
    {Knob::dce_tcp_g, 1020, true}, // g = 1/256
    {Knob::rpg_time_reset, 55, true},
    {Knob::rpg_byte_reset, 10 << 20, true}, // the NIC gets its largest value instead
    {Knob::rpg_threshold, 5, true},
    {Knob::rpg_ai_rate, 40, true},
    {Knob::initial_alpha_value, 1023, true}, // alpha = 1
    {Knob::cnp_dscp, 48, true},
    {Knob::rpg_gd, 11, false},
    {Knob::rpg_min_dec_fac, 50, false},
    {Knob::rpg_hai_rate, 400, false}, // not given: 10 x R_AI
    {Knob::rpg_min_rate, 1, false},
    {Knob::cnp_802p_prio, 0, false},
};

// The ConnectX firmware defaults (MLNX_OFED DCQCN parameter table), to undo experiments.
// min_time_between_cnps and rpg_gd differ between firmware generations and are left to
// the NIC; the model uses 4 us and 11.
constexpr Entry kMlx5[] = {
    {Knob::dce_tcp_rtt, 1, true},
    {Knob::dce_tcp_g, 1019, true},
    {Knob::rpg_time_reset, 300, true},
    {Knob::rpg_byte_reset, 32767, true},
    {Knob::rpg_threshold, 1, true},
    {Knob::rpg_ai_rate, 5, true},
    {Knob::rpg_hai_rate, 50, true},
    {Knob::rpg_min_dec_fac, 50, true},
    {Knob::rpg_min_rate, 1, true},
    {Knob::initial_alpha_value, 1023, true},
    {Knob::cnp_dscp, 48, true},
    {Knob::min_time_between_cnps, 4, false},
    {Knob::rpg_gd, 11, false},
    {Knob::cnp_802p_prio, 0, false},
};

std::span<const Entry> preset(std::string_view name) {
    if (name == "paper") return kPaper;
    if (name == "mlx5") return kMlx5;
    return {};
}

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
    const auto entries = preset(profile);
    if (entries.empty()) return false;
    for (const Entry &e : entries) {
        if (!e.nic) continue;
        const KnobInfo &k = knob_info(e.knob);
        at(out, e.knob) = std::clamp(e.value, k.min, k.max);
    }
    return true;
}

bool model_values(std::string_view profile, KnobValues &out) {
    out = {};
    const auto entries = preset(profile);
    if (entries.empty()) return false;
    for (const Entry &e : entries) at(out, e.knob) = e.value;
    return true;
}

} // namespace ibex::cc::dcqcn
