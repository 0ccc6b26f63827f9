// The DCQCN knobs, named as mlx5 (MLNX_OFED) names them under
// /sys/class/net/<if>/ecn/roce_rp|roce_np, with the firmware's accepted ranges, and the
// two presets. This is the one table: ibexd writes these knobs to a NIC, the soft
// transport runs DCQCN with them (see params.h), and congestion/README.md documents them.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

namespace ibex::cc::dcqcn {

enum class Knob : uint8_t {
    rpg_time_reset,
    rpg_byte_reset,
    rpg_ai_rate,
    rpg_hai_rate,
    rpg_gd,
    rpg_min_dec_fac,
    rpg_min_rate,
    initial_alpha_value,
    dce_tcp_g,
    dce_tcp_rtt,
    rpg_threshold,
    min_time_between_cnps,
    cnp_dscp,
    cnp_802p_prio,
};
inline constexpr size_t kKnobCount = 14;

struct KnobInfo {
    Knob knob;
    std::string_view name;
    std::string_view dir; // "roce_rp" (reaction point) or "roce_np" (notification point)
    int64_t min;          // the firmware's range: ibexd refuses values outside it
    int64_t max;
    std::string_view unit;
    // The largest value the software model accepts (the paper's 10 MB byte counter does
    // not fit the firmware's 15-bit field; elsewhere the same as max).
    int64_t model_max;
};

using KnobValues = std::array<std::optional<int64_t>, kKnobCount>;

std::span<const KnobInfo> knob_table();
const KnobInfo *find_knob(std::string_view name);
const KnobInfo &knob_info(Knob k);
inline std::optional<int64_t> &at(KnobValues &v, Knob k) { return v[static_cast<size_t>(k)]; }
inline const std::optional<int64_t> &at(const KnobValues &v, Knob k) { return v[static_cast<size_t>(k)]; }

// The values a NIC is given for a preset ("paper", "mlx5" or "none"); false for an
// unknown name. Knobs the preset's source gives no value for stay unset, so the NIC keeps
// its own; values beyond the firmware's range are clamped to it.
bool profile_values(std::string_view profile, KnobValues &out);
std::string_view profile_names(); // for messages: "paper, mlx5, none"

// Every knob of a preset ("paper" or "mlx5") as the software model runs it: the
// published values unclamped, and the knobs the source leaves open filled as README.md
// says. False for an unknown name (and for "none", which has no model).
bool model_values(std::string_view profile, KnobValues &out);

} // namespace ibex::cc::dcqcn
