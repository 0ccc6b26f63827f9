// The DCQCN knobs mlx5 (MLNX_OFED) exposes under /sys/class/net/<if>/ecn/roce_rp|roce_np,
// their accepted ranges, and the two presets ibexd knows. Ranges are the firmware's
// (see REFERENCE.md section 4 and the MLNX_OFED DCQCN parameter table): a value outside
// them is refused in the config instead of being sent to the NIC to fail there.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

namespace ibex::tuning {

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
    int64_t min;
    int64_t max;
    std::string_view unit;
};

using KnobValues = std::array<std::optional<int64_t>, kKnobCount>;

std::span<const KnobInfo> knob_table();
const KnobInfo *find_knob(std::string_view name);
const KnobInfo &knob_info(Knob k);

// "paper", "mlx5" or "none"; false for an unknown name. Knobs a preset has no value for
// stay unset, so the NIC keeps its own.
bool profile_values(std::string_view profile, KnobValues &out);
std::string_view profile_names(); // for messages: "paper, mlx5, none"

} // namespace ibex::tuning
