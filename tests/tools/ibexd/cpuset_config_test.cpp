// CPU list/mask syntax and config parsing + validation.
#include "tests/tools/ibexd/fixture.h"

#include "runtime/base/cpuset.h"
#include "runtime/base/rootfs.h"
#include "tools/ibexd/tuning_config.h"

namespace ibex::tuning {
namespace {

using testing::Fixture;

std::string joined(const std::vector<std::string> &v) {
    std::string s;
    for (auto &e : v) s += e + "\n";
    return s;
}

TEST(CpuSet, ParsesAndFormatsLists) {
    CpuSet s;
    std::string err;
    ASSERT_TRUE(CpuSet::parse_list(" 0-3,8,10-11\n", s, err)) << err;
    EXPECT_EQ(s.size(), 7u);
    EXPECT_EQ(s.to_list(), "0-3,8,10-11");
    EXPECT_EQ(s.to_mask(), "d0f");
    ASSERT_TRUE(CpuSet::parse_list("", s, err));
    EXPECT_TRUE(s.empty());
    EXPECT_EQ(CpuSet({0, 32, 33}).to_mask(), "3,00000001");
}

TEST(CpuSet, ParsesMasksTheWayTheKernelPrintsThem) {
    CpuSet s;
    std::string err;
    ASSERT_TRUE(CpuSet::parse_mask("00000000,000000ff", s, err)) << err;
    EXPECT_EQ(s.to_list(), "0-7");
    ASSERT_TRUE(CpuSet::parse_mask("1,00000000", s, err));
    EXPECT_EQ(s.to_list(), "32");
    ASSERT_TRUE(CpuSet::parse_any("0xf0", s, err));
    EXPECT_EQ(s.to_list(), "4-7");
}

TEST(CpuSet, RejectsMalformedValues) {
    CpuSet s;
    std::string err;
    for (const char *bad : {"0-", "-3", "3-1", "1,,2", "1,", "a", "1 2", "0-99999"})
        EXPECT_FALSE(CpuSet::parse_list(bad, s, err)) << bad;
    EXPECT_FALSE(CpuSet::parse_list("8", s, err, 8));
    EXPECT_NE(err.find("out of range"), std::string::npos) << err;
    for (const char *bad : {"", "zz", "123456789", "ff,", ",ff", "0x1"})
        EXPECT_FALSE(CpuSet::parse_mask(bad, s, err)) << bad;
}

TEST(TuningConfig, ParsesGlobalDefaultsSectionsAndProfiles) {
    Fixture fx;
    fx.add_dgx_nics();
    RootFs fs(fx.root());
    Config c;
    std::vector<std::string> errors;
    std::string path = fx.config(R"(# comment
[global]
reserved_cpus = 0-1,16-17   ; training ranks
irqbalance = refuse
interval = 10
dcqcn_profile = paper
rpg_ai_rate = 20
discover = none

[interface ens1f0]
cpus = 0x0000ff00
rps = yes
ecn_priorities = 3,5
dcqcn_profile = mlx5

[interface ens2f0]
xps = no
cnp_dscp = 46
)");
    ASSERT_TRUE(load_config(path, fs, c, errors)) << joined(errors);
    EXPECT_EQ(c.reserved_cpus.to_list(), "0-1,16-17");
    EXPECT_EQ(c.irqbalance, IrqbalancePolicy::refuse);
    EXPECT_EQ(c.interval_s, 10u);
    EXPECT_EQ(c.discover, Discover::none);
    ASSERT_EQ(c.interfaces.size(), 2u);
    const InterfaceSettings &a = c.interfaces[0].settings;
    EXPECT_EQ(c.interfaces[0].name, "ens1f0");
    ASSERT_TRUE(a.cpus.has_value());
    EXPECT_EQ(a.cpus->to_list(), "8-15");
    EXPECT_TRUE(a.rps);
    EXPECT_EQ(a.ecn_priorities.to_list(), "3,5");
    EXPECT_EQ(a.dcqcn_profile, "mlx5");
    // Explicit [global] knob beats the section's preset.
    EXPECT_EQ(a.knobs[static_cast<size_t>(Knob::rpg_ai_rate)], 20);
    EXPECT_EQ(a.knobs[static_cast<size_t>(Knob::rpg_time_reset)], 300);
    const InterfaceSettings &b = c.interfaces[1].settings;
    EXPECT_FALSE(b.xps);
    EXPECT_EQ(b.dcqcn_profile, "paper");
    EXPECT_EQ(b.knobs[static_cast<size_t>(Knob::rpg_time_reset)], 55);
    EXPECT_EQ(b.knobs[static_cast<size_t>(Knob::cnp_dscp)], 46);
    EXPECT_FALSE(b.knobs[static_cast<size_t>(Knob::rpg_hai_rate)].has_value());
}

struct BadCase {
    const char *text;
    const char *message; // expected in the error
};

TEST(TuningConfig, RefusesBadValuesWithClearMessages) {
    Fixture fx;
    fx.add_dgx_nics();
    RootFs fs(fx.root());
    const BadCase cases[] = {
        {"[interface ens9]\n", "ibexd.conf:1: interface 'ens9' does not exist (no /sys/class/net/ens9 under "},
        {"reserved_cpus = 0-\n", "ibexd.conf:1: reserved_cpus = '0-': malformed CPU list element '0-'"},
        {"reserved_cpus = 0xZZ\n", "reserved_cpus = '0xZZ': malformed CPU mask: 'Z' is not a hex digit"},
        {"[interface ens1f0]\ncpus = 7-3\n", "ibexd.conf:2: cpus = '7-3': reversed range '7-3'"},
        {"ecn_priorities = 8\n", "ecn_priorities = '8': priority 8 out of range [0, 7]"},
        {"rpg_ai_rate = 0\n", "ibexd.conf:1: rpg_ai_rate = 0: out of range [1, 800000]"},
        {"cnp_dscp = 64\n", "cnp_dscp = 64: out of range [0, 63]"},
        {"rpg_threshold = 32\n", "rpg_threshold = 32: out of range [1, 31]"},
        {"rpg_min_dec_fac = 101\n", "rpg_min_dec_fac = 101: out of range [1, 100]"},
        {"dce_tcp_g = -1\n", "dce_tcp_g = '-1': not a non-negative decimal integer"},
        {"rpg_time_reset = 1e3\n", "rpg_time_reset = '1e3': not a non-negative decimal integer"},
        {"dcqcn_profile = fast\n", "dcqcn_profile = 'fast': unknown profile (known: paper, mlx5, none)"},
        {"irqbalance = maybe\n", "irqbalance = 'maybe': expected ban or refuse"},
        {"rsp = yes\n", "unknown key 'rsp'"},
        {"[interface ens1f0]\nreserved_cpus = 1\n", "unknown key 'reserved_cpus' in an [interface] section"},
        {"[interface ../etc]\n", "invalid interface name '../etc'"},
        {"[interface ens1f0]\n[interface ens1f0]\n", "interface 'ens1f0' configured twice"},
        {"xps = maybe\n", "xps = 'maybe': expected yes or no"},
        {"state_file = /var/../etc/shadow\n", "expected an absolute file path without '..'"},
        {"interval = 0\n", "interval = 0: out of range [1, 86400]"},
        {"[nic x]\n", "unknown section [nic x]"},
        {"just words\n", "expected 'key = value'"},
        {"discover = none\n", "nothing to tune"},
    };
    for (const BadCase &bc : cases) {
        Config c;
        std::vector<std::string> errors;
        std::string path = fx.config(bc.text);
        EXPECT_FALSE(load_config(path, fs, c, errors)) << bc.text;
        std::string all = joined(errors);
        EXPECT_NE(all.find(bc.message), std::string::npos) << "config:\n" << bc.text << "errors:\n" << all;
    }
}

TEST(TuningConfig, ReportsEveryErrorNotJustTheFirst) {
    Config c;
    std::vector<std::string> errors;
    EXPECT_FALSE(parse_config("rpg_gd = 0\ncnp_802p_prio = 9\nbogus = 1\n", "x.conf", c, errors));
    ASSERT_EQ(errors.size(), 3u) << joined(errors);
    EXPECT_EQ(errors[0], "x.conf:1: rpg_gd = 0: out of range [1, 15]");
    EXPECT_EQ(errors[1], "x.conf:2: cnp_802p_prio = 9: out of range [0, 7]");
    EXPECT_EQ(errors[2], "x.conf:3: unknown key 'bogus'");
}

TEST(TuningConfig, ShippedExampleConfigParses) {
    const char *src = std::getenv("IBEX_TEST_DATA");
    std::string path = src ? std::string(src) + "/../../tools/ibexd/ibexd.conf" : IBEXD_EXAMPLE_CONF;
    std::ifstream f(path);
    ASSERT_TRUE(f.good()) << path;
    std::stringstream ss;
    ss << f.rdbuf();
    Config c;
    std::vector<std::string> errors;
    EXPECT_TRUE(parse_config(ss.str(), path, c, errors)) << joined(errors);
}

} // namespace
} // namespace ibex::tuning
