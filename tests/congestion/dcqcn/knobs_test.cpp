// The knob table and presets: what a NIC is given, what the model runs, and the units.
#include <gtest/gtest.h>

#include "congestion/dcqcn/knobs.h"
#include "congestion/dcqcn/params.h"

using namespace ibex::cc::dcqcn;

TEST(Knobs, NamesAreTheMlx5Ones) {
    for (const char *n : {"rpg_time_reset", "rpg_byte_reset", "rpg_ai_rate", "rpg_hai_rate", "rpg_gd", "rpg_min_dec_fac",
                          "rpg_min_rate", "initial_alpha_value", "dce_tcp_g", "dce_tcp_rtt", "rpg_threshold",
                          "min_time_between_cnps", "cnp_dscp", "cnp_802p_prio"})
        EXPECT_NE(find_knob(n), nullptr) << n;
    EXPECT_EQ(find_knob("rpg_nonsense"), nullptr);
    EXPECT_EQ(find_knob("min_time_between_cnps")->dir, "roce_np");
    EXPECT_EQ(knob_table().size(), kKnobCount);
}

TEST(Knobs, NicGetsThePublishedValuesWithinFirmwareRange) {
    KnobValues v;
    ASSERT_TRUE(profile_values("paper", v));
    EXPECT_EQ(at(v, Knob::rpg_byte_reset), 32767); // 10 MB clamped to the 15-bit field
    EXPECT_EQ(at(v, Knob::rpg_time_reset), 55);
    EXPECT_FALSE(at(v, Knob::rpg_hai_rate).has_value()); // the paper gives none
    ASSERT_TRUE(profile_values("mlx5", v));
    EXPECT_EQ(at(v, Knob::rpg_ai_rate), 5);
    EXPECT_FALSE(at(v, Knob::min_time_between_cnps).has_value());
    ASSERT_TRUE(profile_values("none", v));
    for (const auto &x : v) EXPECT_FALSE(x.has_value());
    EXPECT_FALSE(profile_values("cubic", v));
}

TEST(Knobs, PaperPresetAsTheModelRunsIt) {
    Params p;
    ASSERT_TRUE(preset_params("paper", 2000, p));
    EXPECT_EQ(p.line_rate_mbps, 2000);
    EXPECT_EQ(p.cnp_interval_ns, 50'000u);
    EXPECT_EQ(p.alpha_timer_ns, 55'000u);
    EXPECT_EQ(p.rate_timer_ns, 55'000u);
    EXPECT_EQ(p.byte_counter, 10u << 20);
    EXPECT_EQ(p.threshold, 5u);
    EXPECT_DOUBLE_EQ(p.ai_mbps, 40);
    EXPECT_DOUBLE_EQ(p.g, 1.0 / 256);
    EXPECT_DOUBLE_EQ(p.initial_alpha, 1023.0 / 1024);
    EXPECT_EQ(p.gd_shift, 11u);
}

TEST(Knobs, Mlx5PresetAsTheModelRunsIt) {
    Params p;
    ASSERT_TRUE(preset_params("mlx5", 25000, p));
    EXPECT_EQ(p.rate_timer_ns, 300'000u);
    EXPECT_EQ(p.alpha_timer_ns, 1'000u);
    EXPECT_DOUBLE_EQ(p.g, 5.0 / 1024);
    EXPECT_DOUBLE_EQ(p.ai_mbps, 5);
    EXPECT_DOUBLE_EQ(p.hai_mbps, 50);
    EXPECT_DOUBLE_EQ(p.min_dec_fraction, 0.5);
    EXPECT_EQ(p.threshold, 1u);
    EXPECT_EQ(p.byte_counter, 32767u);
    EXPECT_FALSE(preset_params("none", 1000, p));
}

TEST(Knobs, OverridesApplyAndOutOfRangeIsRefused) {
    Params p;
    ASSERT_TRUE(preset_params("paper", 2000, p));
    KnobValues v{};
    at(v, Knob::rpg_ai_rate) = 80;
    at(v, Knob::min_time_between_cnps) = 10;
    std::string err;
    ASSERT_TRUE(params_from_knobs(v, p, err)) << err;
    EXPECT_DOUBLE_EQ(p.ai_mbps, 80);
    EXPECT_EQ(p.cnp_interval_ns, 10'000u);
    EXPECT_EQ(p.rate_timer_ns, 55'000u); // unset knobs keep the preset's
    at(v, Knob::rpg_gd) = 16;
    EXPECT_FALSE(params_from_knobs(v, p, err));
    EXPECT_NE(err.find("rpg_gd"), std::string::npos);
}
