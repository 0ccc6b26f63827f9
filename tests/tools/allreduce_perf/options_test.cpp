// The command line: nccl-tests' flags and defaults, the ibex additions, clear errors for
// bad input, and the bus-bandwidth factors.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tools/ibex_allreduce_perf/options.h"

namespace {

using namespace ibex::collperf;

std::string parse(const std::vector<const char *> &args, Options *o, Coll def = Coll::allreduce) {
    std::vector<char *> argv{const_cast<char *>("ibex_allreduce_perf")};
    for (const char *a : args) argv.push_back(const_cast<char *>(a));
    return parse_options(static_cast<int>(argv.size()), argv.data(), def, o);
}

TEST(CollPerfOptions, DefaultsAreNcclTests) {
    Options o;
    ASSERT_EQ(parse({}, &o), "");
    EXPECT_EQ(o.coll, Coll::allreduce);
    EXPECT_EQ(o.min_bytes, 32u << 20);
    EXPECT_EQ(o.max_bytes, 32u << 20);
    EXPECT_EQ(o.step_factor, 1u);
    EXPECT_EQ(o.step_bytes, 1u << 20);
    EXPECT_EQ(o.iters, 20);
    EXPECT_EQ(o.warmup, 1);
    EXPECT_EQ(o.check, 1);
    EXPECT_EQ(o.types, std::vector<ibex_datatype_t>{IBEX_F32});
    EXPECT_EQ(o.ops, std::vector<ibex_redop_t>{IBEX_SUM});
    EXPECT_EQ(o.nprocs, 0);
}

TEST(CollPerfOptions, ShortLongAndAttachedForms) {
    Options o;
    ASSERT_EQ(parse({"-b", "8", "-e128M", "--stepfactor=2", "-n", "5", "--warmup_iters", "3", "-c", "0", "-d", "half",
                     "-o", "max", "-np", "4", "--device", "udp:lo", "--algo", "ring", "-T", "7", "--json=/tmp/x.json"},
                    &o),
              "");
    EXPECT_EQ(o.min_bytes, 8u);
    EXPECT_EQ(o.max_bytes, 128u << 20);
    EXPECT_EQ(o.step_factor, 2u);
    EXPECT_EQ(o.iters, 5);
    EXPECT_EQ(o.warmup, 3);
    EXPECT_EQ(o.check, 0);
    EXPECT_EQ(o.types, std::vector<ibex_datatype_t>{IBEX_F16});
    EXPECT_EQ(o.ops, std::vector<ibex_redop_t>{IBEX_MAX});
    EXPECT_EQ(o.nprocs, 4);
    EXPECT_EQ(o.device, "udp:lo");
    EXPECT_EQ(o.algo, "ring");
    EXPECT_EQ(o.timeout_ms, 7000);
    EXPECT_TRUE(o.json);
    EXPECT_EQ(o.json_path, "/tmp/x.json");
}

TEST(CollPerfOptions, AllTypesAllOpsAndTheCollectiveFromNameOrFlag) {
    Options o;
    ASSERT_EQ(parse({"-d", "all", "-o", "all"}, &o), "");
    EXPECT_EQ(o.types.size(), static_cast<size_t>(IBEX_DATATYPE_COUNT));
    EXPECT_EQ(o.ops.size(), static_cast<size_t>(IBEX_REDOP_COUNT));
    ASSERT_EQ(parse({"-o", "all"}, &o, Coll::allgather), "");
    EXPECT_EQ(o.coll, Coll::allgather);
    EXPECT_EQ(o.ops.size(), 1u) << "allgather has no op to vary";
    ASSERT_EQ(parse({"--coll", "reduce_scatter"}, &o, Coll::allgather), "");
    EXPECT_EQ(o.coll, Coll::reduce_scatter);
    ASSERT_EQ(parse({"--coll", "all_gather"}, &o), "");
    EXPECT_EQ(o.coll, Coll::allgather);
    ASSERT_EQ(parse({"--coll", "alltoall"}, &o), "");
    EXPECT_EQ(o.coll, Coll::alltoall);
    EXPECT_FALSE(coll_in_place(Coll::alltoall));
    EXPECT_TRUE(coll_split(Coll::alltoall));
    ASSERT_EQ(parse({"--coll", "sendrecv"}, &o), "");
    EXPECT_EQ(o.coll, Coll::sendrecv);
    EXPECT_FALSE(coll_in_place(Coll::sendrecv));
    EXPECT_FALSE(coll_split(Coll::sendrecv));
}

TEST(CollPerfOptions, GpuBuffersByDashGOrMem) {
    Options o;
    ASSERT_EQ(parse({}, &o), "");
    EXPECT_FALSE(o.gpu);
    ASSERT_EQ(parse({"-G", "1"}, &o), "");
    EXPECT_TRUE(o.gpu);
    ASSERT_EQ(parse({"-G0"}, &o), "");
    EXPECT_FALSE(o.gpu);
    ASSERT_EQ(parse({"--mem", "cuda"}, &o), "");
    EXPECT_TRUE(o.gpu);
    ASSERT_EQ(parse({"--mem=host"}, &o), "");
    EXPECT_FALSE(o.gpu);
    ASSERT_EQ(parse({"--gpu=1"}, &o), "");
    EXPECT_TRUE(o.gpu);
}

TEST(CollPerfOptions, SharedBuffersByDashR) {
    Options o;
    ASSERT_EQ(parse({}, &o), "");
    EXPECT_FALSE(o.shared);
    ASSERT_EQ(parse({"-R", "1"}, &o), "");
    EXPECT_TRUE(o.shared);
    ASSERT_EQ(parse({"--local_register=0"}, &o), "");
    EXPECT_FALSE(o.shared);
    EXPECT_NE(parse({"-R", "2"}, &o).find("-R"), std::string::npos);
    // Shared buffers are host memory.
    EXPECT_NE(parse({"-R", "1", "-G", "1"}, &o).find("-G 1"), std::string::npos);
}

TEST(CollPerfOptions, RanksPerHostNamesTheHostsOfForkedRanks) {
    Options o;
    ASSERT_EQ(parse({"-np", "4"}, &o), "");
    EXPECT_EQ(o.ranks_per_host, 0);
    ASSERT_EQ(parse({"-np", "4", "--ranks_per_host", "2"}, &o), "");
    EXPECT_EQ(o.ranks_per_host, 2);
    ASSERT_EQ(parse({"--ranks_per_host=1", "-np", "2"}, &o), "");
    EXPECT_EQ(o.ranks_per_host, 1);
    EXPECT_NE(parse({"-np", "4", "--ranks_per_host", "0"}, &o).find("--ranks_per_host"), std::string::npos);
    // Ranks from a launcher name their hosts themselves.
    EXPECT_NE(parse({"--ranks_per_host", "2"}, &o).find("IBEX_HOST_ID"), std::string::npos);
}

TEST(CollPerfOptions, BadInputNamesTheFlag) {
    Options o;
    const std::pair<std::vector<const char *>, const char *> cases[] = {
        {{"-b", "12Q"}, "-b"},          {{"-d", "float8"}, "-d"},         {{"-o", "xor"}, "-o"},
        {{"-np", "0"}, "-np"},          {{"-n", "0"}, "-n"},              {{"--coll", "alltoallv"}, "--coll"},
        {{"--algo", "magic"}, "--algo"}, {{"-z", "2"}, "-z"},             {{"--bogus"}, "--bogus"},
        {{"-e"}, "-e"},                 {{"-b", "2M", "-e", "1M"}, "-b"}, {{"stray"}, "stray"},
        {{"-G", "2"}, "-G"},            {{"--mem", "gpu"}, "--mem"},
    };
    for (const auto &[args, flag] : cases) {
        const std::string err = parse(args, &o);
        EXPECT_NE(err, "") << flag;
        EXPECT_NE(err.find(flag), std::string::npos) << "error \"" << err << "\" should name " << flag;
    }
}

TEST(CollPerfOptions, Sizes) {
    size_t v = 0;
    EXPECT_TRUE(parse_size("8", &v));
    EXPECT_EQ(v, 8u);
    EXPECT_TRUE(parse_size("64K", &v));
    EXPECT_EQ(v, 64u << 10);
    EXPECT_TRUE(parse_size("1M", &v));
    EXPECT_EQ(v, 1u << 20);
    EXPECT_TRUE(parse_size("2G", &v));
    EXPECT_EQ(v, 2ull << 30);
    EXPECT_FALSE(parse_size("", &v));
    EXPECT_FALSE(parse_size("-1", &v));
    EXPECT_FALSE(parse_size("1T", &v));
    EXPECT_FALSE(parse_size("99999999999G", &v));
}

TEST(CollPerfOptions, DeviceTemplateTakesTheRank) {
    EXPECT_EQ(device_for_rank("udp:lo", 3), "udp:lo");
    EXPECT_EQ(device_for_rank("dpdk:af_packet:veth{rank},ip=10.9.0.1{rank}/24", 12),
              "dpdk:af_packet:veth12,ip=10.9.0.112/24");
    EXPECT_EQ(device_for_rank("{rank}{rank}", 0), "00");
}

TEST(CollPerfOptions, BusBandwidthFactorsAreNcclTests) {
    EXPECT_DOUBLE_EQ(bus_factor(Coll::allreduce, 4), 1.5);
    EXPECT_DOUBLE_EQ(bus_factor(Coll::allreduce, 2), 1.0);
    EXPECT_DOUBLE_EQ(bus_factor(Coll::allreduce, 1), 0.0);
    EXPECT_DOUBLE_EQ(bus_factor(Coll::reduce_scatter, 4), 0.75);
    EXPECT_DOUBLE_EQ(bus_factor(Coll::allgather, 8), 0.875);
    EXPECT_DOUBLE_EQ(bus_factor(Coll::broadcast, 8), 1.0);
    EXPECT_DOUBLE_EQ(bus_factor(Coll::reduce, 3), 1.0);
    EXPECT_DOUBLE_EQ(bus_factor(Coll::alltoall, 4), 0.75);
    EXPECT_DOUBLE_EQ(bus_factor(Coll::sendrecv, 4), 1.0);
}

} // namespace
