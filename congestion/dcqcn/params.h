// DCQCN parameters in the units the state machines compute with, built from the knob
// values (knobs.h) so that a knob means the same thing in the soft transport as on a NIC.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "congestion/dcqcn/knobs.h"

namespace ibex::cc::dcqcn {

struct Params {
    // ---- reaction point
    double line_rate_mbps = 10000;  // where a flow starts and the ceiling of every increase
    uint64_t rate_timer_ns = 55000; // rpg_time_reset: T, the rate-increase timer
    uint64_t byte_counter = 10u << 20; // rpg_byte_reset: B in bytes (0: no byte counter)
    double ai_mbps = 40;            // rpg_ai_rate: R_AI
    double hai_mbps = 400;          // rpg_hai_rate: R_HAI
    unsigned gd_shift = 11;         // rpg_gd: a CNP cuts by alpha x 1024 / 2^rpg_gd
    double min_dec_fraction = 0.5;  // rpg_min_dec_fac: a CNP keeps at least this much
    double min_rate_mbps = 1;       // rpg_min_rate
    double initial_alpha = 1023.0 / 1024; // initial_alpha_value / 1024
    double g = 1.0 / 256;           // 1 - dce_tcp_g / 1024
    uint64_t alpha_timer_ns = 55000; // dce_tcp_rtt: tau'
    unsigned threshold = 5;         // rpg_threshold: F
    // ---- notification point
    uint64_t cnp_interval_ns = 50000; // min_time_between_cnps
    uint8_t cnp_dscp = 48;
};

// Fills every parameter from `v`; knobs left unset keep `base`'s value. Returns false and
// names the offending knob in `err` when a value is outside its model range.
bool params_from_knobs(const KnobValues &v, Params &out, std::string &err);

// The preset as the model runs it (model_values()), on a line of `line_rate_mbps`.
bool preset_params(std::string_view profile, double line_rate_mbps, Params &out);

} // namespace ibex::cc::dcqcn
