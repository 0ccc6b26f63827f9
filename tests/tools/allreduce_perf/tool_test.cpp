// ibex_allreduce_perf and its twins as a user runs them: -np N forked ranks, a single
// process, and mpirun with ranks from its environment. The table parses as nccl-tests'
// does, busbw = algbw x the collective's factor, #wrong is 0, and bad flags fail at once
// with a message naming the flag.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <cmath>
#include <cstdlib>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <netinet/in.h>
#include <sstream>
#include <string>
#include <sys/socket.h>
#include <unistd.h>
#include <vector>

#include "tests/support/free_port.h"
#include "tests/support/child_process.h"
#include "tests/support/paths.h"

namespace {

struct ToolRun {
    int status = -1;
    std::string out, err;
};

std::string slurp(const std::string &path) {
    std::ifstream f(path);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

std::string tool(const std::string &name) { return ibex::test::build_dir() + "/tools/ibex_allreduce_perf/" + name; }

std::string temp_path(const std::string &tag) {
    return (std::filesystem::temp_directory_path() / ("ibex_collperf_" + std::to_string(getpid()) + "_" + tag)).string();
}

// A started tool: argv[0] run with argv, stdout and stderr going to files; killed after
// timeout_s (the alarm survives exec, and the tool's own ranks die with it).
class Started {
public:
    Started(const std::vector<std::string> &argv, int timeout_s, const std::vector<std::string> &env)
        : timeout_s_(timeout_s), out_(temp_path("out" + std::to_string(++serial_))),
          err_(temp_path("err" + std::to_string(serial_))) {
        started_ = child_.start(
            [&](int) {
                const int o = ::open(out_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
                const int e = ::open(err_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
                if (o < 0 || e < 0) return 126;
                ::dup2(o, 1);
                ::dup2(e, 2);
                // Nothing from the test's own environment may look like a launcher.
                for (const char *v : {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "SLURM_PROCID", "SLURM_NTASKS",
                                      "RANK", "WORLD_SIZE", "IBEX_RANK", "IBEX_NRANKS", "IBEX_ROOT_ADDR", "IBEX_DEVICE",
                                      "MASTER_ADDR", "MASTER_PORT"})
                    ::unsetenv(v);
                for (const std::string &kv : env) ::putenv(const_cast<char *>(kv.c_str()));
                std::vector<char *> args;
                for (const std::string &a : argv) args.push_back(const_cast<char *>(a.c_str()));
                args.push_back(nullptr);
                ::execvp(args[0], args.data());
                return 127;
            },
            static_cast<unsigned>(timeout_s));
    }

    ToolRun wait() {
        ToolRun r;
        if (!started_) return r;
        r.status = child_.wait_exit(timeout_s_ * 1000 + 5000);
        r.out = slurp(out_);
        r.err = slurp(err_);
        std::filesystem::remove(out_);
        std::filesystem::remove(err_);
        return r;
    }

private:
    static inline int serial_ = 0;
    int timeout_s_;
    std::string out_, err_;
    ibex::test::ChildProcess child_;
    bool started_ = false;
};

ToolRun run(const std::vector<std::string> &argv, int timeout_s, const std::vector<std::string> &env = {}) {
    return Started(argv, timeout_s, env).wait();
}

struct Row {
    double size, count;
    std::string type, redop;
    int root;
    double time[2], algbw[2], busbw[2];
    std::string wrong[2];
};

// The data lines of the table (every line that is not a comment).
std::vector<Row> table(const std::string &text) {
    std::vector<Row> rows;
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line)) {
        if (line.empty() || line[0] == '#') continue;
        std::istringstream ls(line);
        Row r{};
        if (ls >> r.size >> r.count >> r.type >> r.redop >> r.root >> r.time[0] >> r.algbw[0] >> r.busbw[0] >> r.wrong[0] >>
            r.time[1] >> r.algbw[1] >> r.busbw[1] >> r.wrong[1])
            rows.push_back(r);
        else
            rows.push_back(Row{-1, -1, line, "", 0, {}, {}, {}, {}}); // an unparsable line fails the size checks
    }
    return rows;
}

// "key": number pairs of a flat JSON text, in order (enough for the tool's output).
std::vector<double> json_numbers(const std::string &json, const std::string &key) {
    std::vector<double> v;
    const std::string k = "\"" + key + "\": ";
    for (size_t p = json.find(k); p != std::string::npos; p = json.find(k, p + 1))
        v.push_back(std::strtod(json.c_str() + p + k.size(), nullptr));
    return v;
}

using ibex::test::free_port;

// busbw / algbw of every result in the JSON equals the collective's factor.
void expect_bus_factor(const std::string &json, double factor) {
    const auto fac = json_numbers(json, "bus_factor");
    ASSERT_EQ(fac.size(), 1u) << json;
    EXPECT_NEAR(fac[0], factor, 1e-6);
    const auto alg = json_numbers(json, "algbw_GBps"), bus = json_numbers(json, "busbw_GBps");
    ASSERT_EQ(alg.size(), bus.size());
    ASSERT_FALSE(alg.empty());
    for (size_t i = 0; i < alg.size(); ++i) {
        EXPECT_GT(alg[i], 0.0);
        EXPECT_NEAR(bus[i], alg[i] * factor, 1e-5 + 1e-6 * bus[i]);
    }
    for (double w : json_numbers(json, "wrong")) EXPECT_EQ(w, 0.0);
}

TEST(AllreducePerfTool, TwoForkedRanksPrintNcclTestsTable) {
    const std::string json = temp_path("two.json");
    const ToolRun r = run({tool("ibex_allreduce_perf"), "-np", "2", "-b", "8", "-e", "256K", "-f", "4", "-n", "5",
                       "--device", "udp:lo", "--json=" + json},
                      120);
    ASSERT_EQ(r.status, 0) << r.out << r.err;
    EXPECT_NE(r.out.find("2 ranks (forked by -np)"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("#  Rank  1 Pid "), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("out-of-place"), std::string::npos);
    EXPECT_NE(r.out.find("in-place"), std::string::npos);
    // Two ranks of one host: the sizes up to the fast boxes' 4 KiB go through them, the
    // larger ones read and write the peer's buffers directly.
    EXPECT_NE(r.out.find("# Algorithm: 8-2048 B fastbox, 8192-131072 B direct"), std::string::npos) << r.out;
    // The slice the ranks agreed on: shm carries them, so the communicator's own 128 KiB.
    EXPECT_NE(r.out.find("# Slice: 131072 B, 8 staging slots per peer"), std::string::npos) << r.out;
    const auto rows = table(r.out);
    ASSERT_EQ(rows.size(), 8u) << r.out; // 8 B, 32 B, ... 256 KiB
    double sum_bus = 0;
    for (size_t i = 0; i < rows.size(); ++i) {
        const Row &row = rows[i];
        EXPECT_EQ(row.size, 8.0 * std::pow(4.0, static_cast<double>(i))) << r.out;
        EXPECT_EQ(row.count, row.size / 4);
        EXPECT_EQ(row.type, "float");
        EXPECT_EQ(row.redop, "sum");
        EXPECT_EQ(row.root, -1);
        for (int p = 0; p < 2; ++p) {
            EXPECT_GT(row.time[p], 0.0);
            EXPECT_EQ(row.wrong[p], "0");
            // algbw = size / time (GB/s), busbw = algbw for 2 ranks; the table rounds both to
            // 0.01, and a time of a few tenths of a microsecond so by a few percent.
            EXPECT_NEAR(row.algbw[p], row.size / (row.time[p] * 1e3),
                        0.0051 + (0.01 + 0.0051 / row.time[p]) * row.algbw[p]);
            EXPECT_NEAR(row.busbw[p], row.algbw[p], 0.0051);
            sum_bus += row.busbw[p];
        }
    }
    const size_t avg_at = r.out.find("# Avg bus bandwidth    : ");
    ASSERT_NE(avg_at, std::string::npos);
    EXPECT_NEAR(std::strtod(r.out.c_str() + avg_at + 25, nullptr), sum_bus / 16, 0.006);
    EXPECT_NE(r.out.find("# Out of bounds values : 0 OK"), std::string::npos);
    const std::string j = slurp(json);
    std::filesystem::remove(json);
    EXPECT_EQ(json_numbers(j, "nranks"), std::vector<double>{2});
    expect_bus_factor(j, 1.0);
}

// -G 1 / --mem cuda: GPU buffers, checked on the host after copying back. Without a GPU
// (or a CUDA build) every rank stops at once saying so.
TEST(AllreducePerfTool, GpuBuffersCheckCleanOrNoCudaDeviceIsSaid) {
    for (const char *flag : {"-G1", "--mem=cuda"}) {
        const ToolRun r = run({tool("ibex_allreduce_perf"), "-np", "2", "-b", "8", "-e", "1M", "-f", "8", "-n", "3",
                               "--device", "udp:lo", flag},
                              120);
        if (r.err.find("no CUDA device") != std::string::npos) {
            EXPECT_EQ(r.status, 2) << r.err;
            EXPECT_NE(r.err.find("--mem cuda"), std::string::npos) << r.err;
            EXPECT_TRUE(table(r.out).empty()) << "nothing may be measured without a GPU: " << r.out;
            continue;
        }
        // A GPU host: the same table, every result checked clean.
        ASSERT_EQ(r.status, 0) << r.out << r.err;
        EXPECT_NE(r.out.find("buffers GPU"), std::string::npos) << r.out;
        const auto rows = table(r.out);
        ASSERT_EQ(rows.size(), 6u) << r.out; // 8 B, 64 B, ... 256 KiB (x8 steps up to 1 MiB)
        for (const Row &row : rows)
            for (int p = 0; p < 2; ++p) EXPECT_EQ(row.wrong[p], "0") << r.out;
    }
}

TEST(AllreducePerfTool, EachCollectiveUsesItsBusFactor) {
    const struct {
        const char *name;
        double factor; // nccl-tests' for 3 ranks
    } cases[] = {{"ibex_reduce_scatter_perf", 2.0 / 3}, {"ibex_allgather_perf", 2.0 / 3},
                 {"ibex_broadcast_perf", 1.0},        {"ibex_reduce_perf", 1.0},
                 {"ibex_allreduce_perf", 4.0 / 3}};
    for (const auto &c : cases) {
        SCOPED_TRACE(c.name);
        const std::string json = temp_path("fac.json");
        const ToolRun r = run({tool(c.name), "-np", "3", "-b", "96", "-e", "96K", "-f", "32", "-n", "3", "-r", "2",
                           "--device", "udp:lo", "--json=" + json},
                          120);
        ASSERT_EQ(r.status, 0) << r.out << r.err;
        const auto rows = table(r.out);
        ASSERT_EQ(rows.size(), 3u) << r.out;
        const bool rooted = std::string(c.name).find("broadcast") != std::string::npos ||
                            std::string(c.name) == "ibex_reduce_perf";
        const bool has_op = std::string(c.name).find("reduce") != std::string::npos;
        for (const Row &row : rows) {
            EXPECT_EQ(row.root, rooted ? 2 : -1);
            EXPECT_EQ(row.redop, has_op ? "sum" : "none");
            EXPECT_EQ(row.count * 4, row.size);
        }
        const std::string j = slurp(json);
        std::filesystem::remove(json);
        expect_bus_factor(j, c.factor);
    }
}

// nccl-tests' alltoall_perf (the size is a rank's whole send buffer, count every block's
// elements, busbw = algbw (n-1)/n) and sendrecv_perf (each rank sends the size to the next
// and receives it from the one before at once, busbw = algbw): checked clean, no in-place
// form, so N/A there.
// --ranks_per_host 1: each forked rank its own host, so the pair talks over the udp port
// (as across a network) rather than through shm, and every result still checks clean.
TEST(AllreducePerfTool, RanksPerHostPutsForkedRanksOnHostsOfTheirOwn) {
    for (const char *coll : {"sendrecv", "allreduce"}) {
        SCOPED_TRACE(coll);
        const ToolRun r = run({tool("ibex_allreduce_perf"), "-np", "2", "--ranks_per_host", "1", "--coll", coll, "-b",
                               "8", "-e", "256K", "-f", "16", "-n", "3", "--device", "udp:lo"},
                              120);
        ASSERT_EQ(r.status, 0) << r.out << r.err;
        EXPECT_NE(r.out.find("# Topology: 2 hosts, 1 ranks per host; rank 0 reaches 0 peers over shm, 1 over the device"),
                  std::string::npos)
            << r.out;
        EXPECT_NE(r.out.find("Out of bounds values : 0 OK"), std::string::npos) << r.out;
    }
}

TEST(AllreducePerfTool, AlltoallAndSendrecvCheckCleanOutOfPlaceOnly) {
    const struct {
        const char *tool, *coll;
        double factor;
    } cases[] = {{"ibex_alltoall_perf", "alltoall", 2.0 / 3}, {"ibex_sendrecv_perf", "sendrecv", 1.0}};
    for (const auto &c : cases) {
        SCOPED_TRACE(c.tool);
        const std::string json = temp_path(std::string(c.coll) + ".json");
        const ToolRun r = run({tool(c.tool), "-np", "3", "-b", "96", "-e", "3M", "-f", "32", "-n", "3", "-d", "all",
                               "--device", "udp:lo", "--json=" + json},
                              120);
        ASSERT_EQ(r.status, 0) << r.out << r.err;
        EXPECT_NE(r.out.find("Out of bounds values : 0 OK"), std::string::npos) << r.out;
        int lines = 0;
        std::istringstream in(r.out);
        for (std::string line; std::getline(in, line);) {
            if (line.empty() || line[0] == '#') continue;
            std::istringstream ls(line);
            double size = 0, count = 0, time = 0, algbw = 0, busbw = 0;
            std::string type, redop, root, wrong, rest[4];
            ASSERT_TRUE(ls >> size >> count >> type >> redop >> root >> time >> algbw >> busbw >> wrong >> rest[0] >>
                        rest[1] >> rest[2] >> rest[3])
                << line;
            const double elem = type == "double" || type == "int64"     ? 8
                                : type == "half" || type == "bfloat16" ? 2
                                : type == "uint8"                       ? 1
                                                                        : 4;
            EXPECT_EQ(count * elem, size) << line;
            EXPECT_EQ(redop, "none");
            EXPECT_EQ(wrong, "0") << line;
            for (const std::string &na : rest) EXPECT_EQ(na, "N/A") << line;
            ++lines;
        }
        EXPECT_EQ(lines, 4 * 7) << r.out; // 96 B, 3 KiB, 96 KiB, 3 MiB; seven types
        const std::string j = slurp(json);
        std::filesystem::remove(json);
        EXPECT_NE(j.find(std::string("\"collective\": \"") + c.coll + "\""), std::string::npos) << j;
        EXPECT_NE(j.find("\"in_place\": null"), std::string::npos) << j;
        expect_bus_factor(j, c.factor);
    }
}

TEST(AllreducePerfTool, EveryTypeAndOpChecksClean) {
    const ToolRun r = run({tool("ibex_allreduce_perf"), "-np", "3", "-d", "all", "-o", "all", "-b", "1000", "-e", "1000",
                       "-n", "1", "-w", "0", "--device", "udp:lo"},
                      120);
    ASSERT_EQ(r.status, 0) << r.out << r.err;
    const auto rows = table(r.out);
    ASSERT_EQ(rows.size(), 35u) << r.out;
    for (const Row &row : rows) {
        EXPECT_EQ(row.wrong[0], "0") << row.type << " " << row.redop;
        EXPECT_EQ(row.wrong[1], "0") << row.type << " " << row.redop;
    }
}

// -R 1: buffers from ibex_comm_mem_alloc, said in the header and the JSON, every collective
// clean on them (the direct path's sizes, in place and out of place).
TEST(AllreducePerfTool, SharedBuffersCheckClean) {
    for (const char *coll : {"allreduce", "reduce_scatter", "allgather", "broadcast", "reduce"}) {
        const ToolRun r = run({tool("ibex_allreduce_perf"), "-np", "3", "--coll", coll, "-R", "1", "-b", "64K", "-e",
                           "1M", "-f", "4", "-n", "2", "-w", "1", "--json=/dev/stderr"},
                          120);
        ASSERT_EQ(r.status, 0) << coll << r.out << r.err;
        EXPECT_NE(r.out.find("buffers host, ibex_comm_mem_alloc"), std::string::npos) << r.out;
        EXPECT_NE(r.err.find("\"memory\": \"host-shared\""), std::string::npos) << r.err;
        const auto rows = table(r.out);
        ASSERT_EQ(rows.size(), 3u) << r.out;
        for (const Row &row : rows) {
            EXPECT_EQ(row.wrong[0], "0") << coll << " " << row.size;
            EXPECT_EQ(row.wrong[1], "0") << coll << " " << row.size;
        }
    }
}

TEST(AllreducePerfTool, OneProcessWithoutLauncherIsOneRank) {
    const ToolRun r = run({tool("ibex_allgather_perf"), "-b", "4K", "-e", "4K", "-n", "2", "--device", "udp:lo"}, 60);
    ASSERT_EQ(r.status, 0) << r.out << r.err;
    EXPECT_NE(r.out.find("1 rank (single process)"), std::string::npos) << r.out;
    const auto rows = table(r.out);
    ASSERT_EQ(rows.size(), 1u) << r.out;
    EXPECT_EQ(rows[0].busbw[0], 0.0); // (n-1)/n = 0
    EXPECT_EQ(rows[0].wrong[0], "0");
}

TEST(AllreducePerfTool, JsonAloneOnStdoutMovesTheTableToStderr) {
    const ToolRun r = run({tool("ibex_allreduce_perf"), "-np", "2", "-b", "1K", "-e", "1K", "-n", "2", "--device", "udp:lo",
                       "--json"},
                      60);
    ASSERT_EQ(r.status, 0) << r.out << r.err;
    ASSERT_FALSE(r.out.empty());
    EXPECT_EQ(r.out[0], '{') << r.out;
    EXPECT_NE(r.out.find("\"collective\": \"allreduce\""), std::string::npos);
    EXPECT_NE(r.err.find("# Avg bus bandwidth"), std::string::npos) << r.err;
}

TEST(AllreducePerfTool, BadFlagsFailAtOnceNamingTheFlag) {
    const std::pair<std::vector<std::string>, std::string> cases[] = {
        {{"-d", "float8"}, "-d"},  {{"-o", "xor"}, "-o"},         {{"-b", "1X"}, "-b"},
        {{"-np", "x"}, "-np"},     {{"--frobnicate"}, "--frobnicate"}, {{"-b", "4M", "-e", "1M"}, "-b"},
        {{"--coll", "alltoallv"}, "--coll"},
    };
    for (const auto &[args, flag] : cases) {
        std::vector<std::string> argv{tool("ibex_allreduce_perf")};
        argv.insert(argv.end(), args.begin(), args.end());
        const auto t0 = std::chrono::steady_clock::now();
        const ToolRun r = run(argv, 30);
        EXPECT_EQ(r.status, 2) << flag << ": " << r.err;
        EXPECT_NE(r.err.find(flag), std::string::npos) << r.err;
        EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));
    }
    // A root that is not a rank is found once the ranks exist.
    const ToolRun r = run({tool("ibex_broadcast_perf"), "-np", "2", "-r", "5", "-b", "8", "-e", "8", "--device", "udp:lo"}, 60);
    EXPECT_EQ(r.status, 2);
    EXPECT_NE(r.err.find("-r 5 is not a rank"), std::string::npos) << r.err;
    const ToolRun h = run({tool("ibex_allreduce_perf"), "--help"}, 30);
    EXPECT_EQ(h.status, 0);
    EXPECT_NE(h.out.find("--stepfactor"), std::string::npos);
}

// What torchrun and srun give each process, set by hand: two separately started
// processes find each other from RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT, and from
// SLURM_PROCID/SLURM_NTASKS on one node with no rendezvous named (the tool derives one
// from the job id).
TEST(AllreducePerfTool, TwoRanksFromTorchrunAndSrunEnvironments) {
    const std::string port = std::to_string(free_port());
    const std::string job = std::to_string(100000 + getpid() % 50000);
    const std::vector<std::vector<std::string>> launchers[] = {
        {{"RANK=0", "WORLD_SIZE=2", "MASTER_ADDR=127.0.0.1", "MASTER_PORT=" + port},
         {"RANK=1", "WORLD_SIZE=2", "MASTER_ADDR=127.0.0.1", "MASTER_PORT=" + port}},
        {{"SLURM_PROCID=0", "SLURM_NTASKS=2", "SLURM_NNODES=1", "SLURM_JOB_ID=" + job, "SLURM_STEP_ID=0"},
         {"SLURM_PROCID=1", "SLURM_NTASKS=2", "SLURM_NNODES=1", "SLURM_JOB_ID=" + job, "SLURM_STEP_ID=0"}},
    };
    const char *names[] = {"torchrun", "srun"};
    for (size_t l = 0; l < 2; ++l) {
        SCOPED_TRACE(names[l]);
        const std::vector<std::string> args{tool("ibex_allreduce_perf"), "-b", "4K", "-e", "4K", "-n", "3", "--device",
                                            "udp:lo"};
        Started r0(args, 90, launchers[l][0]), r1(args, 90, launchers[l][1]);
        const ToolRun a = r0.wait(), b = r1.wait();
        ASSERT_EQ(a.status, 0) << a.out << a.err;
        ASSERT_EQ(b.status, 0) << b.out << b.err;
        EXPECT_NE(a.out.find(std::string("2 ranks (launched by ") + names[l] + ")"), std::string::npos) << a.out;
        EXPECT_EQ(b.out, "") << "only rank 0 prints";
        const auto rows = table(a.out);
        ASSERT_EQ(rows.size(), 1u) << a.out;
        EXPECT_EQ(rows[0].wrong[0], "0");
        EXPECT_EQ(rows[0].wrong[1], "0");
    }
}

// Open MPI's mpirun starts four ranks that find each other through its environment
// (OMPI_COMM_WORLD_RANK/SIZE) and the rendezvous the test names, then without one (the
// tool derives a loopback rendezvous from the job id when all ranks share the host).
TEST(AllreducePerfTool, FourRanksUnderMpirun) {
    if (std::system("command -v mpirun >/dev/null 2>&1") != 0) GTEST_SKIP() << "mpirun not installed (openmpi-bin)";
    const std::string addr = "IBEX_ROOT_ADDR=127.0.0.1:" + std::to_string(free_port());
    for (bool explicit_root : {true, false}) {
        SCOPED_TRACE(explicit_root ? "IBEX_ROOT_ADDR given" : "rendezvous from the job id");
        const std::string json = temp_path("mpi.json");
        std::vector<std::string> argv{"mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "4"};
        if (explicit_root) argv.insert(argv.end(), {"-x", addr.substr(0, addr.find('='))});
        argv.insert(argv.end(), {tool("ibex_allreduce_perf"), "-b", "8", "-e", "64K", "-f", "8", "-n", "3", "--device",
                                 "udp:lo", "--json=" + json});
        const ToolRun r = run(argv, 150, explicit_root ? std::vector<std::string>{addr} : std::vector<std::string>{});
        ASSERT_EQ(r.status, 0) << r.out << r.err;
        EXPECT_NE(r.out.find("4 ranks (launched by mpirun)"), std::string::npos) << r.out;
        EXPECT_EQ(table(r.out).size(), 5u) << r.out;
        const std::string j = slurp(json);
        std::filesystem::remove(json);
        EXPECT_EQ(json_numbers(j, "nranks"), std::vector<double>{4});
        expect_bus_factor(j, 1.5);
    }
}

} // namespace
