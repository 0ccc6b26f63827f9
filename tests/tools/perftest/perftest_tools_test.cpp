// The eight perftest-style tools as a user runs them: server and client as two processes
// over loopback (soft provider, udp:lo), every size of -a with a few iterations. The
// tables must parse and hold sane, self-consistent values on both sides.
#include <cstring>

#include "tests/tools/perftest/tool_process.h"

namespace ibex::test::perftest {
namespace {

struct ToolCase {
    const char *name;
    bool bw;
    bool atomic;
};

std::string case_name(const testing::TestParamInfo<ToolCase> &i) { return i.param.name; }

std::vector<double> all_sizes(bool atomic) {
    if (atomic) return {8};
    std::vector<double> v;
    for (double s = 2; s <= 8 * 1024 * 1024; s *= 2) v.push_back(s);
    return v;
}

// Each row has the expected size and iteration count; check(row) asserts the rest.
template <class Check>
void check_rows(const std::vector<std::vector<double>> &rows, const std::vector<double> &sizes, double iters,
                const std::string &side, Check check) {
    ASSERT_EQ(rows.size(), sizes.size()) << side;
    for (size_t i = 0; i < rows.size(); ++i) {
        SCOPED_TRACE(side + " size " + std::to_string(rows[i][0]));
        EXPECT_EQ(rows[i][0], sizes[i]);
        EXPECT_EQ(rows[i][1], iters);
        check(rows[i]);
    }
}

void check_bw_rows(const std::vector<std::vector<double>> &rows, const std::vector<double> &sizes, double iters,
                   bool gbits, const std::string &side, bool peak_measured = true) {
    check_rows(rows, sizes, iters, side, [&](const std::vector<double> &r) {
        // A few tiny messages on a loaded 2-core host can average below 0.005 MiB/s, which
        // the table prints as 0.00: only sizes of 64 KiB and up must show a figure.
        EXPECT_GE(r[3], 0);
        if (r[0] >= 65536) {
            EXPECT_GT(r[3], 0);
        }
        EXPECT_LT(r[3], gbits ? 1e4 : 1e6); // below 10 Tb/s, 1 TiB/s: a sane loopback figure
        if (peak_measured) {
            EXPECT_GE(r[2] * 1.001 + 0.01, r[3]) << "peak below average";
        } else {
            EXPECT_EQ(r[2], 0) << "a SEND receiver claims no peak";
        }
        EXPECT_GT(r[4], 0);
        if (r[4] >= 0.001) { // MsgRate has 6 decimals: compare where it has 3 significant digits
            const double expect = gbits ? r[4] * 1e6 * r[0] * 8 / 1e9 : r[4] * 1e6 * r[0] / (1024.0 * 1024.0);
            EXPECT_NEAR(r[3], expect, 0.02 * r[3] + 0.01) << "average and message rate disagree";
        }
    });
}

void check_lat_rows(const std::vector<std::vector<double>> &rows, const std::vector<double> &sizes, double iters,
                    const std::string &side) {
    check_rows(rows, sizes, iters, side, [&](const std::vector<double> &r) {
        const double tmin = r[2], tmax = r[3], typ = r[4], avg = r[5], sd = r[6], p99 = r[7], p999 = r[8];
        EXPECT_GT(tmin, 0);
        EXPECT_LE(tmin, typ);
        EXPECT_LE(typ, tmax);
        EXPECT_LE(tmin, avg);
        EXPECT_LE(avg, tmax);
        EXPECT_GE(sd, 0);
        EXPECT_LE(typ, p99);
        EXPECT_LE(p99, p999);
        EXPECT_LE(p999, tmax);
        EXPECT_LT(tmax, 10e6); // below 10 s
    });
}

class AllSizes : public testing::TestWithParam<ToolCase> {};

// -a with 5 iterations (perftest's minimum) per size keeps each pair to a few seconds.
TEST_P(AllSizes, TablesParseAndAreSane) {
    const ToolCase &c = GetParam();
    auto [server, client] = run_pair(c.name, {"-a", "-n", "5"}, 120);
    ASSERT_EQ(client.status, 0) << client.err;
    ASSERT_EQ(server.status, 0) << server.err;
    for (const Result *side : {&client, &server}) {
        EXPECT_NE(side->out.find("Connection type : RC"), std::string::npos);
        EXPECT_NE(side->out.find(" local address: LID"), std::string::npos);
        EXPECT_NE(side->out.find(" remote address: LID"), std::string::npos);
        EXPECT_NE(side->out.find(" GID: 00:00:00:00:00:00:00:00:00:00:255:255:127:"), std::string::npos);
        EXPECT_NE(side->out.find(c.bw ? " BW Test" : " Latency Test"), std::string::npos) << side->out;
    }
    const auto sizes = all_sizes(c.atomic);
    if (c.bw) {
        check_bw_rows(table(client.out, kBwHeaderMiB, 5), sizes, 5, false, "client");
        // The server of a SEND test reports what it received (average only); the others
        // show the client's figures.
        const bool send = std::string(c.name) == "ibex_send_bw";
        check_bw_rows(table(server.out, kBwHeaderMiB, 5), sizes, 5, false, "server", !send);
    } else {
        check_lat_rows(table(client.out, kLatHeader, 9), sizes, 5, "client");
        check_lat_rows(table(server.out, kLatHeader, 9), sizes, 5, "server");
    }
}

INSTANTIATE_TEST_SUITE_P(PerftestTools, AllSizes,
                         testing::Values(ToolCase{"ibex_write_bw", true, false}, ToolCase{"ibex_read_bw", true, false},
                                         ToolCase{"ibex_send_bw", true, false}, ToolCase{"ibex_atomic_bw", true, true},
                                         ToolCase{"ibex_write_lat", false, false},
                                         ToolCase{"ibex_read_lat", false, false},
                                         ToolCase{"ibex_send_lat", false, false},
                                         ToolCase{"ibex_atomic_lat", false, true}),
                         case_name);

// The same eight tools over the shm provider (two processes of this host), with the
// buffer from ibex_mem_alloc (the default) and from ordinary memory (--use_malloc).
struct ShmCase {
    ToolCase tool;
    bool malloc_buf;
};

class ShmTools : public testing::TestWithParam<ShmCase> {};

TEST_P(ShmTools, TablesParseAndAreSane) {
    const ToolCase &c = GetParam().tool;
    std::vector<std::string> flags{"-d", "shm", "-a", "-n", "5"};
    if (GetParam().malloc_buf) flags.push_back("--use_malloc");
    auto [server, client] = run_pair(c.name, flags, 120);
    ASSERT_EQ(client.status, 0) << client.err;
    ASSERT_EQ(server.status, 0) << server.err;
    const std::string memory = GetParam().malloc_buf ? "host (--use_malloc)" : "host (ibex_mem_alloc)";
    for (const Result *side : {&client, &server}) {
        EXPECT_NE(side->out.find(" Buffer memory   : " + memory), std::string::npos) << side->out;
        EXPECT_NE(side->out.find(" GID: 105:98:120:115:"), std::string::npos) << "an shm address (\"ibxs\")";
    }
    const auto sizes = all_sizes(c.atomic);
    if (c.bw) {
        check_bw_rows(table(client.out, kBwHeaderMiB, 5), sizes, 5, false, "client");
        check_bw_rows(table(server.out, kBwHeaderMiB, 5), sizes, 5, false, "server", std::string(c.name) != "ibex_send_bw");
    } else {
        check_lat_rows(table(client.out, kLatHeader, 9), sizes, 5, "client");
        check_lat_rows(table(server.out, kLatHeader, 9), sizes, 5, "server");
    }
}

INSTANTIATE_TEST_SUITE_P(
    PerftestTools, ShmTools,
    testing::Values(ShmCase{{"ibex_write_bw", true, false}, false}, ShmCase{{"ibex_read_bw", true, false}, false},
                    ShmCase{{"ibex_send_bw", true, false}, false}, ShmCase{{"ibex_atomic_bw", true, true}, false},
                    ShmCase{{"ibex_write_lat", false, false}, false}, ShmCase{{"ibex_read_lat", false, false}, false},
                    ShmCase{{"ibex_send_lat", false, false}, false}, ShmCase{{"ibex_atomic_lat", false, true}, false},
                    ShmCase{{"ibex_write_bw", true, false}, true}, ShmCase{{"ibex_read_lat", false, false}, true}),
    [](const testing::TestParamInfo<ShmCase> &i) {
        return std::string(i.param.tool.name) + (i.param.malloc_buf ? "_malloc" : "");
    });

TEST(PerftestTools, TitlesNameTheOperation) {
    // The client prints perftest's title for each verb.
    const std::pair<const char *, const char *> cases[] = {
        {"ibex_read_bw", "RDMA_Read BW Test"},
        {"ibex_atomic_lat", "Atomic FETCH_AND_ADD Latency Test"},
    };
    for (const auto &[name, title] : cases) {
        auto [server, client] = run_pair(name, {"-n", "5"}, 60);
        ASSERT_EQ(client.status, 0) << client.err;
        EXPECT_NE(client.out.find(title), std::string::npos) << client.out;
        EXPECT_NE(client.out.find("Outstand reads  : 16"), std::string::npos) << client.out;
    }
}

TEST(PerftestTools, ReportGbitsConverts) {
    // The same 64 KiB run in both units: Gb/s = messages/s x bytes x 8 / 10^9, and
    // MiB/s x 2^20 x 8 / 10^9 of the same rate.
    auto [server, client] = run_pair("ibex_read_bw", {"-s", "65536", "-n", "200", "--report_gbits"}, 60);
    ASSERT_EQ(client.status, 0) << client.err;
    ASSERT_EQ(server.status, 0) << server.err;
    EXPECT_EQ(client.out.find("MiB/sec"), std::string::npos);
    const auto rows = table(client.out, kBwHeaderGb, 5);
    ASSERT_EQ(rows.size(), 1u) << client.out;
    const auto &r = rows[0];
    ASSERT_GT(r[3], 0);
    EXPECT_NEAR(r[3], r[4] * 1e6 * 65536 * 8 / 1e9, 0.02 * r[3] + 0.01);
    // The server shows the client's row in the same unit.
    const auto srows = table(server.out, kBwHeaderGb, 5);
    ASSERT_EQ(srows.size(), 1u) << server.out;
    EXPECT_NEAR(srows[0][3], r[3], 0.011);
}

TEST(PerftestTools, MultipleQps) {
    // perftest counts iterations over all QPs: -q 4 -n 20 reports 80.
    auto [server, client] = run_pair("ibex_write_bw", {"-q", "4", "-n", "20", "-s", "8192"}, 60);
    ASSERT_EQ(client.status, 0) << client.err;
    ASSERT_EQ(server.status, 0) << server.err;
    EXPECT_NE(client.out.find("Number of qps   : 4"), std::string::npos);
    size_t locals = 0;
    for (size_t at = client.out.find(" local address:"); at != std::string::npos;
         at = client.out.find(" local address:", at + 1))
        ++locals;
    EXPECT_EQ(locals, 4u);
    const auto rows = table(client.out, kBwHeaderMiB, 5);
    ASSERT_EQ(rows.size(), 1u);
    EXPECT_EQ(rows[0][1], 80);
    EXPECT_GT(rows[0][3], 0);
}

// -e: the runner sleeps on completion events while every QP is at its depth (300 messages
// against a depth of 128), and every iteration still completes.
TEST(PerftestTools, EventsModeCompletesEveryIteration) {
    for (const char *name : {"ibex_write_bw", "ibex_send_bw"}) {
        SCOPED_TRACE(name);
        auto [server, client] = run_pair(name, {"-e", "-n", "300", "-s", "65536"}, 60);
        ASSERT_EQ(client.status, 0) << client.err;
        ASSERT_EQ(server.status, 0) << server.err;
        const auto rows = table(client.out, kBwHeaderMiB, 5);
        ASSERT_EQ(rows.size(), 1u) << client.out;
        EXPECT_EQ(rows[0][1], 300);
        EXPECT_GT(rows[0][3], 0);
    }
}

TEST(PerftestTools, BidirectionalSumsBothDirections) {
    for (const char *name : {"ibex_write_bw", "ibex_send_bw"}) {
        SCOPED_TRACE(name);
        auto [server, client] = run_pair(name, {"-b", "--report-both", "-n", "100", "-s", "65536"}, 60);
        ASSERT_EQ(client.status, 0) << client.err;
        ASSERT_EQ(server.status, 0) << server.err;
        EXPECT_NE(client.out.find("Bidirectional BW Test"), std::string::npos);
        for (const Result *side : {&client, &server}) {
            const auto sum = table(side->out, kBwHeaderMiB, 5);
            const size_t local_at = side->out.find(" Local results:");
            const size_t remote_at = side->out.find(" Remote results:");
            ASSERT_NE(local_at, std::string::npos) << side->out;
            ASSERT_NE(remote_at, std::string::npos) << side->out;
            const auto local = table(side->out.substr(local_at), kBwHeaderMiB, 5);
            const auto remote = table(side->out.substr(remote_at), kBwHeaderMiB, 5);
            ASSERT_EQ(sum.size(), 1u);
            ASSERT_EQ(local.size(), 1u);
            ASSERT_EQ(remote.size(), 1u);
            EXPECT_GT(local[0][3], 0);
            EXPECT_GT(remote[0][3], 0);
            EXPECT_NEAR(sum[0][3], local[0][3] + remote[0][3], 0.02);
        }
    }
}

TEST(PerftestTools, DurationMode) {
    auto [server, client] = run_pair("ibex_send_bw", {"-D", "1", "-s", "4096"}, 60);
    ASSERT_EQ(client.status, 0) << client.err;
    ASSERT_EQ(server.status, 0) << server.err;
    for (const Result *side : {&client, &server}) {
        const auto rows = table(side->out, kBwHeaderMiB, 5);
        ASSERT_EQ(rows.size(), 1u) << side->out;
        EXPECT_GT(rows[0][1], 0);
        EXPECT_GT(rows[0][3], 0);
    }
    // The receiver took every message the sender sent.
    EXPECT_EQ(table(client.out, kBwHeaderMiB, 5)[0][1], table(server.out, kBwHeaderMiB, 5)[0][1]);
    auto [lserver, lclient] = run_pair("ibex_write_lat", {"-D", "1"}, 60);
    ASSERT_EQ(lclient.status, 0) << lclient.err;
    ASSERT_EQ(lserver.status, 0) << lserver.err;
    const auto rows = table(lclient.out, kLatHeader, 9);
    ASSERT_EQ(rows.size(), 1u);
    EXPECT_GT(rows[0][1], 10);
}

TEST(PerftestTools, RunInfinitelyReportsUntilInterrupted) {
    const std::string port = std::to_string(free_port());
    const std::vector<std::string> flags{"--run_infinitely", "-D", "1", "-s", "4096", "-p", port};
    Proc server(cmd("ibex_write_bw", flags));
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    std::vector<std::string> c = flags;
    c.push_back("127.0.0.1");
    Proc client(cmd("ibex_write_bw", c));
    // Wait for two interval lines (bounded), then interrupt as a user would.
    const auto deadline = Clock::now() + std::chrono::seconds(30);
    while (Clock::now() < deadline && table(client.out_so_far(), kBwHeaderMiB, 5).size() < 2)
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    client.signal(SIGINT);
    const Result cr = client.wait(30);
    const Result sr = server.wait(30);
    ASSERT_EQ(cr.status, 0) << cr.err;
    ASSERT_EQ(sr.status, 0) << sr.err;
    const auto rows = table(cr.out, kBwHeaderMiB, 5);
    ASSERT_GE(rows.size(), 3u) << cr.out; // two or more intervals and the closing line
    for (const auto &r : rows) EXPECT_GT(r[3], 0);
}

TEST(PerftestTools, JsonIsValid) {
    char tmpl[] = "/tmp/ibex_perftest_json_XXXXXX";
    const std::string dir = mkdtemp(tmpl);
    // Bandwidth: JSON to a file, the tables still on stdout.
    {
        const std::string file = dir + "/bw.json";
        auto [server, client] = run_pair("ibex_write_bw", {"-s", "4096", "-n", "50"}, 60, {"--json", file});
        ASSERT_EQ(client.status, 0) << client.err;
        ASSERT_EQ(server.status, 0) << server.err;
        std::string why;
        EXPECT_TRUE(valid_json_file(file, &why)) << why;
        const std::string doc = slurp(file);
        for (const char *key : {"\"test\": \"write_bw\"", "\"device\"", "\"mtu\"", "\"local\"", "\"remote\"",
                                "\"units\": \"MiB/sec\"", "\"results\"", "\"bytes\": 4096", "\"iterations\": 50",
                                "\"bw_peak\"", "\"bw_average\"", "\"msg_rate_mpps\""})
            EXPECT_NE(doc.find(key), std::string::npos) << key << " missing in " << doc;
        EXPECT_NE(client.out.find(kBwHeaderMiB), std::string::npos);
    }
    // Latency: JSON alone on stdout, the tables on stderr.
    {
        auto [server, client] = run_pair("ibex_atomic_lat", {"-n", "50"}, 60, {"--json"});
        ASSERT_EQ(client.status, 0) << client.err;
        ASSERT_EQ(server.status, 0) << server.err;
        const std::string file = dir + "/lat.json";
        std::ofstream(file) << client.out;
        std::string why;
        EXPECT_TRUE(valid_json_file(file, &why)) << why << "\n" << client.out;
        for (const char *key : {"\"test\": \"atomic_lat\"", "\"units\": \"usec\"", "\"bytes\": 8", "\"t_typical\"",
                                "\"p99_9\""})
            EXPECT_NE(client.out.find(key), std::string::npos) << key << " missing in " << client.out;
        EXPECT_NE(client.err.find(kLatHeader), std::string::npos) << client.err;
    }
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
}

TEST(PerftestTools, NumaBindingIsReported) {
    // Loopback has no NIC behind it: nothing to bind to, and the header says so.
    auto [server, client] = run_pair("ibex_write_lat", {"-n", "5"}, 60);
    ASSERT_EQ(client.status, 0) << client.err;
    EXPECT_NE(client.out.find(" NUMA binding    : not bound (udp:lo has no NIC)"), std::string::npos) << client.out;
    auto [s2, c2] = run_pair("ibex_write_lat", {"-n", "5", "--disable_numa"}, 60);
    ASSERT_EQ(c2.status, 0) << c2.err;
    EXPECT_NE(c2.out.find(" NUMA binding    : off (--disable_numa)"), std::string::npos) << c2.out;
}

// With no progress thread (IBEX_PROGRESS_THREAD=0) an engine runs only inside ibex
// calls. The tools then drive their own while they wait for the peer over TCP: a client
// that had stopped calling ibex once it had the last pong never sent the ACK it owed for
// it (delayed, to cover several messages), and the server's last WRITE failed with
// RETRY_EXC_ERR about half the time. A long ACK delay makes the owed ACK certain.
TEST(PerftestTools, AppDrivenEnginesFinishCleanly) {
    setenv("IBEX_PROGRESS_THREAD", "0", 1);
    setenv("IBEX_ACK_DELAY_US", "10000", 1);
    for (int round = 0; round < 3; ++round) {
        for (const char *name : {"ibex_write_lat", "ibex_send_lat", "ibex_write_bw"}) {
            SCOPED_TRACE(std::string(name) + " round " + std::to_string(round));
            auto [server, client] = run_pair(name, {"-n", "5", "-s", "2"}, 60);
            EXPECT_EQ(client.status, 0) << client.err;
            EXPECT_EQ(server.status, 0) << server.err;
        }
    }
    unsetenv("IBEX_PROGRESS_THREAD");
    unsetenv("IBEX_ACK_DELAY_US");
}

TEST(PerftestTools, CongestionControlLinesAfterTheTable) {
    // With DCQCN on (the children inherit IBEX_DCQCN), both sides say so after the table,
    // with the CNP counters and each QP's final rate, and the JSON carries the same.
    setenv("IBEX_DCQCN", "paper", 1);
    auto [server, client] = run_pair("ibex_write_bw", {"-n", "200", "-q", "2"}, 60, {"--json"});
    unsetenv("IBEX_DCQCN");
    ASSERT_EQ(client.status, 0) << client.err;
    ASSERT_EQ(server.status, 0) << server.err;
    for (const std::string *text : {&client.err, &server.out}) {
        EXPECT_NE(text->find(" DCQCN           : on"), std::string::npos) << *text;
        EXPECT_NE(text->find(" CNPs sent       : "), std::string::npos);
        size_t qps = 0;
        for (size_t at = text->find(" final rate : "); at != std::string::npos; at = text->find(" final rate : ", at + 1))
            ++qps;
        EXPECT_EQ(qps, 2u) << *text;
    }
    EXPECT_NE(client.out.find("\"congestion\": {\"dcqcn\": true"), std::string::npos) << client.out;
    // Off by default: no such lines.
    auto [s2, c2] = run_pair("ibex_write_bw", {"-n", "20"}, 60);
    ASSERT_EQ(c2.status, 0) << c2.err;
    EXPECT_EQ(c2.out.find("DCQCN"), std::string::npos) << c2.out;
}

TEST(PerftestTools, LossRecoveryLineAfterTheTable) {
    // Selective mode under 1% loss: both sides print the loss-recovery counters after the
    // table (the server's responder held packets and sent NAKs, the client resent), and
    // the JSON carries them.
    setenv("IBEX_RETRANSMIT", "selective", 1);
    setenv("IBEX_FAULT_LOSS", "0.01", 1);
    auto [server, client] = run_pair("ibex_write_bw", {"-n", "400"}, 60, {"--json"});
    unsetenv("IBEX_RETRANSMIT");
    unsetenv("IBEX_FAULT_LOSS");
    ASSERT_EQ(client.status, 0) << client.err;
    ASSERT_EQ(server.status, 0) << server.err;
    for (const std::string *text : {&client.err, &server.out})
        EXPECT_NE(text->find(" Loss recovery   : selective (out-of-order store "), std::string::npos) << *text;
    auto count = [](const std::string &t, const char *key) -> long {
        const size_t at = t.find(key);
        return at == std::string::npos ? -1 : std::stol(t.substr(at + std::strlen(key)));
    };
    EXPECT_GT(count(server.out, "held out of order "), 0) << server.out;
    EXPECT_GT(count(server.out, "NAKs sent "), 0) << server.out;
    EXPECT_GT(count(client.err, "packets resent "), 0) << client.err;
    EXPECT_NE(client.out.find("\"retransmit\": {\"mode\": \"selective\""), std::string::npos) << client.out;
    // Go-back-N without loss has nothing to say.
    auto [s2, c2] = run_pair("ibex_write_bw", {"-n", "20"}, 60);
    ASSERT_EQ(c2.status, 0) << c2.err;
    EXPECT_EQ(c2.out.find("Loss recovery"), std::string::npos) << c2.out;
    EXPECT_EQ(c2.err.find("Loss recovery"), std::string::npos) << c2.err;
}

// -l chains the posts (a last list shorter when the count is not a multiple), its length
// is the moderation, and -N leaves the peak at 0.00 while every iteration is counted.
TEST(PerftestTools, PostListsAndNoPeak) {
    for (const char *name : {"ibex_write_bw", "ibex_send_bw"}) {
        auto [server, client] = run_pair(name, {"-l", "8", "-N", "-n", "1001", "-s", "4096"}, 60);
        ASSERT_EQ(client.status, 0) << name << ": " << client.err;
        ASSERT_EQ(server.status, 0) << name << ": " << server.err;
        const std::string &sender = client.out;
        EXPECT_NE(sender.find("Post List       : 8"), std::string::npos) << sender;
        EXPECT_NE(sender.find("CQ Moderation   : 8"), std::string::npos) << sender;
        const auto rows = table(sender, kBwHeaderMiB, 5);
        ASSERT_EQ(rows.size(), 1u) << sender;
        EXPECT_EQ(rows[0][1], 1001) << sender;
        EXPECT_EQ(rows[0][2], 0) << "-N: no peak";
        EXPECT_GT(rows[0][3], 0);
    }
}

// -T, -u and -I reach the QPs: the header and the JSON say what the provider reports.
TEST(PerftestTools, TrafficClassServiceLevelTimeoutAndInlineReachTheQps) {
    char tmpl[] = "/tmp/ibex_perftest_tc_XXXXXX";
    const std::string dir = mkdtemp(tmpl);
    const std::string file = dir + "/lat.json";
    auto [server, client] =
        run_pair("ibex_write_lat", {"-T", "104", "-S", "5", "-u", "16", "-I", "64", "-n", "100"}, 60, {"--json", file});
    ASSERT_EQ(client.status, 0) << client.err;
    ASSERT_EQ(server.status, 0) << server.err;
    for (const std::string *out : {&client.out, &server.out}) {
        EXPECT_NE(out->find("Traffic class   : 104 (DSCP 26)"), std::string::npos) << *out;
        EXPECT_NE(out->find("Max inline data : 64[B]"), std::string::npos) << *out;
        EXPECT_NE(out->find("Service level   : 5"), std::string::npos) << *out;
    }
    const std::string doc = slurp(file);
    for (const char *key : {"\"traffic_class\": 104", "\"sl\": 5", "\"qp_timeout\": 16", "\"inline_size\": 64"})
        EXPECT_NE(doc.find(key), std::string::npos) << key << " missing in " << doc;
    EXPECT_FALSE(table(client.out, kLatHeader, 9).empty()) << client.out;
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
}

// --output: stdout carries one number per size and nothing else.
TEST(PerftestTools, OutputPrintsOneFigurePerSize) {
    auto numbers = [](const std::string &out, size_t *lines) {
        std::istringstream in(out);
        std::string line;
        std::vector<double> v;
        *lines = 0;
        while (std::getline(in, line)) {
            ++*lines;
            char *end = nullptr;
            const double x = std::strtod(line.c_str(), &end);
            if (end && *end == 0 && !line.empty()) v.push_back(x);
        }
        return v;
    };
    auto [server, client] =
        run_pair("ibex_write_bw", {"-a", "-n", "20", "--output=bandwidth", "--report_gbits"}, 120);
    ASSERT_EQ(client.status, 0) << client.err;
    ASSERT_EQ(server.status, 0) << server.err;
    size_t lines = 0;
    const auto bw = numbers(client.out, &lines);
    EXPECT_EQ(bw.size(), 23u) << client.out; // 2 B .. 8 MiB
    EXPECT_EQ(lines, bw.size()) << "stdout holds the figures alone:\n" << client.out;
    ASSERT_FALSE(bw.empty());
    EXPECT_GT(bw.back(), 0);

    auto [lserver, lclient] = run_pair("ibex_send_lat", {"-n", "200", "--output=latency"}, 60);
    ASSERT_EQ(lclient.status, 0) << lclient.err;
    const auto lat = numbers(lclient.out, &lines);
    ASSERT_EQ(lat.size(), 1u) << lclient.out;
    EXPECT_EQ(lines, 1u) << lclient.out;
    EXPECT_GT(lat[0], 0);
}

// -H: every sample after its size's row, sorted; -U: the same, in the order measured.
// --out_json_file: the JSON document in that file.
TEST(PerftestTools, HistogramsAndPerftestsJsonFile) {
    auto samples = [](const std::string &out) {
        std::istringstream in(out);
        std::string line;
        std::vector<double> v;
        bool in_list = false;
        while (std::getline(in, line)) {
            if (line == "#, usec") {
                in_list = true;
                continue;
            }
            size_t index = 0;
            double usec = 0;
            if (in_list && std::sscanf(line.c_str(), "%zu, %lf", &index, &usec) == 2 && index == v.size() + 1)
                v.push_back(usec);
            else
                in_list = false;
        }
        return v;
    };
    auto [server, client] = run_pair("ibex_write_lat", {"-n", "50", "-H"}, 60);
    ASSERT_EQ(client.status, 0) << client.err;
    ASSERT_EQ(server.status, 0) << server.err;
    const auto sorted = samples(client.out);
    EXPECT_EQ(sorted.size(), 49u) << "one sample between each two of 50 posts:\n" << client.out;
    EXPECT_TRUE(std::is_sorted(sorted.begin(), sorted.end())) << client.out;
    EXPECT_EQ(samples(server.out).size(), 49u) << "the ping-pong's other side measures too";
    const size_t list = client.out.find("#, usec"), row = client.out.find("\n 2 ", list);
    EXPECT_NE(row, std::string::npos) << "the size's row follows its samples:\n" << client.out;

    char tmpl[] = "/tmp/ibex_perftest_oj_XXXXXX";
    const std::string dir = mkdtemp(tmpl);
    const std::string file = dir + "/read.json";
    auto [rserver, rclient] = run_pair("ibex_read_lat", {"-n", "40", "-U"}, 60, {"--out_json", "--out_json_file=" + file});
    ASSERT_EQ(rclient.status, 0) << rclient.err;
    const auto unsorted = samples(rclient.out);
    EXPECT_EQ(unsorted.size(), 39u) << rclient.out;
    for (double x : unsorted) EXPECT_GT(x, 0);
    EXPECT_TRUE(samples(rserver.out).empty()) << "a READ server measures nothing";
    EXPECT_NE(slurp(file).find("\"t_typical\""), std::string::npos) << slurp(file);
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
}

// -w and -y: a run below its limit ends with status 1 and says which figure missed.
TEST(PerftestTools, LimitsFailARunThatMissesThem) {
    auto [server, client] = run_pair("ibex_write_bw", {"-n", "100", "-s", "4096", "-w", "1e9"}, 60);
    EXPECT_EQ(client.status, 1) << client.out;
    EXPECT_NE(client.err.find("BW average"), std::string::npos) << client.err;
    EXPECT_NE(client.err.find("below the limit -w"), std::string::npos) << client.err;
    EXPECT_FALSE(table(client.out, kBwHeaderMiB, 5).empty()) << "the table is still printed:\n" << client.out;

    auto [s2, c2] = run_pair("ibex_write_bw", {"-n", "100", "-s", "4096", "-y", "0.000001"}, 60);
    EXPECT_EQ(c2.status, 0) << c2.err;
}

} // namespace
} // namespace ibex::test::perftest
