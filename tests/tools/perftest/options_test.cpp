// The command line as perftest users type it: per-tool defaults, flags refused by tools
// perftest does not offer them on, combinations that make no sense, and the NIC name the
// NUMA placement looks up.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "tools/ibex_perftest/numa.h"
#include "tools/ibex_perftest/options.h"

namespace ibex::perftest {
namespace {

ParseResult parse(Test t, std::vector<std::string> args, Options *o) {
    args.insert(args.begin(), tool_name(t));
    std::vector<char *> argv;
    for (auto &a : args) argv.push_back(a.data());
    return parse_options(t, static_cast<int>(argv.size()), argv.data(), o);
}

// A command line each tool must refuse.
struct Refused {
    perftest::Test t;
    std::vector<std::string> args;
};

template <size_t N> void expect_refused(const Refused (&bad)[N]) {
    for (const Refused &b : bad) {
        Options o;
        std::string joined;
        for (const auto &a : b.args) joined += a + " ";
        EXPECT_EQ(parse(b.t, b.args, &o), ParseResult::error) << tool_name(b.t) << " " << joined;
    }
}

TEST(PerftestOptions, DefaultsFollowPerftest) {
    Options o;
    ASSERT_EQ(parse({Verb::write, Kind::bw}, {}, &o), ParseResult::ok);
    EXPECT_EQ(o.size, 65536u);
    EXPECT_EQ(o.iters, 5000u);
    EXPECT_EQ(o.tx_depth, 128u);
    EXPECT_EQ(o.port, 18515);
    EXPECT_TRUE(o.is_server());
    EXPECT_TRUE(o.numa);
    ASSERT_EQ(parse({Verb::read, Kind::bw}, {"host"}, &o), ParseResult::ok);
    EXPECT_EQ(o.iters, 1000u);
    EXPECT_EQ(o.out_reads, 16u);
    EXPECT_EQ(o.server, "host");
    ASSERT_EQ(parse({Verb::send, Kind::lat}, {}, &o), ParseResult::ok);
    EXPECT_EQ(o.size, 2u);
    EXPECT_EQ(o.iters, 1000u);
    EXPECT_EQ(o.tx_depth, 1u);
    EXPECT_EQ(o.rx_depth, 512u);
    ASSERT_EQ(parse({Verb::atomic, Kind::bw}, {"-a"}, &o), ParseResult::ok);
    EXPECT_EQ(o.size, 8u);
    EXPECT_EQ(o.atomic_type, AtomicType::fetch_and_add);
}

TEST(PerftestOptions, GetoptSpellings) {
    Options o;
    ASSERT_EQ(parse({Verb::write, Kind::bw}, {"-as4096", "--iters=20", "--report-gbits", "-q", "3", "-d", "udp:eth0",
                                              "--use_cuda=2", "--disable_numa", "10.0.0.1"},
                    &o),
              ParseResult::ok);
    EXPECT_TRUE(o.all);
    EXPECT_EQ(o.size, 4096u);
    EXPECT_EQ(o.iters, 20u);
    EXPECT_TRUE(o.report_gbits);
    EXPECT_EQ(o.num_qps, 3u);
    EXPECT_EQ(o.device, "udp:eth0");
    EXPECT_EQ(o.use_cuda, 2);
    EXPECT_FALSE(o.numa);
    EXPECT_EQ(o.server, "10.0.0.1");
    ASSERT_EQ(parse({Verb::atomic, Kind::lat}, {"-A", "CMP_AND_SWAP", "-o", "4"}, &o), ParseResult::ok);
    EXPECT_EQ(o.atomic_type, AtomicType::cmp_and_swap);
    EXPECT_EQ(o.out_reads, 4u);
    ASSERT_EQ(parse({Verb::write, Kind::bw}, {"--run_infinitely"}, &o), ParseResult::ok);
    EXPECT_EQ(o.duration, 5); // perftest reports every -D seconds, 5 by default
    EXPECT_FALSE(o.events);
    Options e;
    ASSERT_EQ(parse({Verb::send, Kind::bw}, {"-e"}, &e), ParseResult::ok);
    EXPECT_TRUE(e.events);
    Options l;
    EXPECT_NE(parse({Verb::write, Kind::lat}, {"--events"}, &l), ParseResult::ok) << "the latency tools spin";
}

TEST(PerftestOptions, RefusesWhatPerftestRefuses) {
    Options o;
    const Refused bad[] = {
        {{Verb::write, Kind::lat}, {"-q", "2"}},          // no QPs option on latency tests
        {{Verb::read, Kind::lat}, {"-b"}},                // nor bidirectional
        {{Verb::write, Kind::bw}, {"-r", "64"}},          // rx depth: send tests only
        {{Verb::write, Kind::bw}, {"-o", "4"}},           // outstanding reads: read/atomic only
        {{Verb::read, Kind::bw}, {"-A", "FETCH_AND_ADD"}}, // atomic type: atomics only
        {{Verb::atomic, Kind::bw}, {"-s", "16"}},         // atomics move 8 bytes
        {{Verb::write, Kind::bw}, {"-s", "0"}},
        {{Verb::write, Kind::bw}, {"-n", "4"}},           // at least 5
        {{Verb::write, Kind::bw}, {"-D", "2", "-n", "100"}},
        {{Verb::write, Kind::bw}, {"-D", "2", "-a"}},
        {{Verb::write, Kind::bw}, {"--run_infinitely", "-a"}},
        {{Verb::write, Kind::bw}, {"-m", "1500"}},
        {{Verb::write, Kind::bw}, {"-c", "UD"}},
        {{Verb::write, Kind::bw}, {"--use_cuda=x"}},
        {{Verb::write, Kind::bw}, {"--report_gbits=1"}},
        {{Verb::write, Kind::bw}, {"-p"}},
        {{Verb::write, Kind::bw}, {"host1", "host2"}},
    };
    expect_refused(bad);
    EXPECT_EQ(parse({Verb::write, Kind::bw}, {"-h"}, &o), ParseResult::help);
}

TEST(PerftestOptions, TheFlagsOfPerftestsCommandLinesFromTheField) {
    Options o;
    // Defaults: moderation 100, single posts, peak measured, traffic class 0, timeout 14.
    ASSERT_EQ(parse({Verb::write, Kind::bw}, {}, &o), ParseResult::ok);
    EXPECT_EQ(o.cq_mod, 100u);
    EXPECT_EQ(o.post_list, 1u);
    EXPECT_FALSE(o.no_peak);
    EXPECT_EQ(o.traffic_class, 0);
    EXPECT_EQ(o.qp_timeout, 14);
    EXPECT_EQ(o.inline_size, 0u);
    EXPECT_EQ(o.output, Output::table);

    ASSERT_EQ(parse({Verb::write, Kind::bw},
                    {"-Q", "16", "-N", "-T", "106", "-u", "20", "-I", "64", "-w", "12.5", "-y", "0.25",
                     "--output=bandwidth"},
                    &o),
              ParseResult::ok);
    EXPECT_EQ(o.cq_mod, 16u);
    EXPECT_TRUE(o.no_peak);
    EXPECT_EQ(o.traffic_class, 106);
    EXPECT_EQ(o.qp_timeout, 20);
    EXPECT_EQ(o.inline_size, 64u);
    EXPECT_DOUBLE_EQ(o.limit_bw, 12.5);
    EXPECT_DOUBLE_EQ(o.limit_msgrate, 0.25);
    EXPECT_EQ(o.output, Output::bandwidth);

    // A post list sets the moderation to its length, as perftest does.
    ASSERT_EQ(parse({Verb::send, Kind::bw}, {"-l", "8", "--cq-mod=8", "--output=message_rate"}, &o), ParseResult::ok);
    EXPECT_EQ(o.post_list, 8u);
    EXPECT_EQ(o.cq_mod, 8u);
    EXPECT_EQ(o.output, Output::message_rate);
    ASSERT_EQ(parse({Verb::send, Kind::lat}, {"--inline_size=32", "--tos=32", "--output=latency"}, &o), ParseResult::ok);
    EXPECT_EQ(o.inline_size, 32u);
    EXPECT_EQ(o.traffic_class, 32);
    EXPECT_EQ(o.output, Output::latency);
    ASSERT_EQ(parse({Verb::read, Kind::lat}, {"-T", "0", "-u", "0"}, &o), ParseResult::ok);
    EXPECT_EQ(o.qp_timeout, 0);
    EXPECT_EQ(parse({Verb::write, Kind::bw}, {"-V"}, &o), ParseResult::help);
    // -S: the QPs' service level (connect_steps puts it at RTR); none: the provider's.
    ASSERT_EQ(parse({Verb::write, Kind::lat}, {"-S", "3"}, &o), ParseResult::ok);
    EXPECT_EQ(o.sl, 3);
    ASSERT_EQ(parse({Verb::write, Kind::lat}, {}, &o), ParseResult::ok);
    EXPECT_EQ(o.sl, -1);
    EXPECT_EQ(o.histogram, Histogram::none);
    // -H and -U (which implies -H) on the latency tests.
    ASSERT_EQ(parse({Verb::read, Kind::lat}, {"-H"}, &o), ParseResult::ok);
    EXPECT_EQ(o.histogram, Histogram::sorted);
    ASSERT_EQ(parse({Verb::write, Kind::lat}, {"--report-unsorted"}, &o), ParseResult::ok);
    EXPECT_EQ(o.histogram, Histogram::unsorted);
    // perftest's JSON flags: --out_json writes perftest_out.json, --out_json_file names it.
    ASSERT_EQ(parse({Verb::send, Kind::bw}, {"--out_json"}, &o), ParseResult::ok);
    EXPECT_TRUE(o.json);
    EXPECT_EQ(o.json_path, "perftest_out.json");
    for (const auto &args : {std::vector<std::string>{"--out_json", "--out_json_file=/tmp/r.json"},
                             std::vector<std::string>{"--out_json_file=/tmp/r.json", "--out_json"}}) {
        ASSERT_EQ(parse({Verb::send, Kind::bw}, args, &o), ParseResult::ok);
        EXPECT_TRUE(o.json);
        EXPECT_EQ(o.json_path, "/tmp/r.json");
    }

    const Refused bad[] = {
        {{Verb::write, Kind::bw}, {"-l", "4", "-Q", "100"}},   // the list sets the moderation
        {{Verb::write, Kind::bw}, {"-l", "256", "-t", "128"}}, // a list must fit the depth
        {{Verb::write, Kind::lat}, {"-l", "4"}},               // bandwidth tests only
        {{Verb::write, Kind::lat}, {"-Q", "4"}},
        {{Verb::write, Kind::lat}, {"-N"}},
        {{Verb::write, Kind::bw}, {"-Q", "0"}},
        {{Verb::write, Kind::bw}, {"-T", "256"}},
        {{Verb::write, Kind::bw}, {"-u", "32"}},
        {{Verb::write, Kind::bw}, {"-S", "8"}},                // 3 bits of VLAN priority
        {{Verb::write, Kind::bw}, {"-I", "65"}},               // above what ibex posts inline
        {{Verb::read, Kind::bw}, {"-I", "16"}},                // READs carry no payload out
        {{Verb::atomic, Kind::lat}, {"-I", "8"}},
        {{Verb::write, Kind::bw}, {"-w", "0"}},
        {{Verb::write, Kind::bw}, {"-w", "fast"}},
        {{Verb::write, Kind::bw}, {"-y", "-1"}},
        {{Verb::write, Kind::lat}, {"-w", "10"}},
        {{Verb::write, Kind::bw}, {"--output=latency"}},
        {{Verb::write, Kind::lat}, {"--output=bandwidth"}},
        {{Verb::write, Kind::bw}, {"--output=all"}},
        {{Verb::write, Kind::bw}, {"--output=bandwidth", "--json"}}, // both on stdout
        {{Verb::write, Kind::bw}, {"-H"}},                     // latency tests only
        {{Verb::read, Kind::bw}, {"-U"}},
        {{Verb::write, Kind::lat}, {"--out_json_file="}},
    };
    expect_refused(bad);
    ASSERT_EQ(parse({Verb::write, Kind::bw}, {"--output=bandwidth", "--json=/tmp/x.json"}, &o), ParseResult::ok);
}

TEST(PerftestOptions, NicNameOfADevice) {
    EXPECT_EQ(nic_name("udp:eth0"), "eth0");
    EXPECT_EQ(nic_name("udp:eth0:4791"), "eth0");
    EXPECT_EQ(nic_name("udp:lo"), "");
    EXPECT_EQ(nic_name("mlx5_0"), "mlx5_0");
    EXPECT_EQ(nic_name("dpdk:af_xdp:eth1,ip=10.0.0.1/24"), "eth1");
    EXPECT_EQ(nic_name("dpdk:af_packet:veth0"), "veth0");
    EXPECT_EQ(nic_name("dpdk:pci:0000:3b:00.0,ip=10.0.0.1"), "0000:3b:00.0");
    EXPECT_EQ(nic_name("dpdk:memif:/tmp/a.sock,role=server"), "");
    const NumaPlacement off = place_near_nic("udp:eth0", false);
    EXPECT_EQ(off.node, -1);
    EXPECT_EQ(off.summary, "off (--disable_numa)");
    EXPECT_EQ(place_near_nic("udp:lo", true).summary, "not bound (udp:lo has no NIC)");
}

} // namespace
} // namespace ibex::perftest
