// Bad input to the perftest-style tools: a clear message on stderr, a non-zero exit
// status, and no waiting around.
#include "tests/tools/perftest/tool_process.h"

namespace ibex::test::perftest {
namespace {

void expect_quick_failure(const Result &r, const std::string &needle, double max_s) {
    EXPECT_NE(r.status, 0);
    EXPECT_NE(r.status, -1) << "killed at the deadline (hung)";
    EXPECT_LT(r.seconds, max_s);
    EXPECT_NE(r.err.find(needle), std::string::npos) << "stderr: " << r.err;
}

TEST(PerftestErrors, UnknownDevice) {
    const std::string port = std::to_string(free_port());
    Proc server(cmd("ibex_write_bw", {"-d", "udp:no_such_if0", "-p", port}));
    expect_quick_failure(server.wait(20), "no_such_if0", 5);
    Proc client(cmd("ibex_send_lat", {"-d", "nosuchprovider:x", "-p", port, "127.0.0.1"}));
    expect_quick_failure(client.wait(20), "cannot open device", 5);
}

TEST(PerftestErrors, SizeAboveMaximum) {
    Proc bw(cmd("ibex_read_bw", {"-s", "4294967296"}));
    expect_quick_failure(bw.wait(20), "message size 4294967296 is out of range", 5);
    Proc lat(cmd("ibex_write_lat", {"-s", "0", "127.0.0.1"}));
    expect_quick_failure(lat.wait(20), "message size", 5);
    Proc atomic(cmd("ibex_atomic_bw", {"-s", "16"}));
    expect_quick_failure(atomic.wait(20), "atomics", 5);
}

TEST(PerftestErrors, PortInUse) {
    const std::string port = std::to_string(free_port());
    Proc first(cmd("ibex_write_bw", {"-p", port}));
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    Proc second(cmd("ibex_read_lat", {"-p", port}));
    expect_quick_failure(second.wait(20), "Address already in use", 5);
    // A socket of another program holds the port.
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr *>(&a), sizeof a), 0);
    ASSERT_EQ(listen(fd, 1), 0);
    socklen_t len = sizeof a;
    getsockname(fd, reinterpret_cast<sockaddr *>(&a), &len);
    Proc lat(cmd("ibex_atomic_lat", {"-p", std::to_string(ntohs(a.sin_port))}));
    expect_quick_failure(lat.wait(20), "in use", 5);
    close(fd);
}

TEST(PerftestErrors, ServerNotReachable) {
    const std::string port = std::to_string(free_port());
    // Side by side: each gives up after its own few seconds.
    Proc bw(cmd("ibex_send_bw", {"-p", port, "127.0.0.1"}));
    Proc lat(cmd("ibex_write_lat", {"-p", port, "localhost"}));
    Proc bad(cmd("ibex_atomic_bw", {"-p", port, "no-such-host.invalid"}));
    expect_quick_failure(bw.wait(20), "cannot connect", 8);
    expect_quick_failure(lat.wait(20), "cannot connect", 8);
    expect_quick_failure(bad.wait(20), "cannot resolve", 8);
}

TEST(PerftestErrors, UnknownFlagPrintsUsage) {
    Proc p(cmd("ibex_write_bw", {"--no-such-flag"}));
    Result r = p.wait(10);
    EXPECT_EQ(r.status, 1);
    EXPECT_NE(r.err.find("unknown option '--no-such-flag'"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("Usage:"), std::string::npos) << r.err;
    // A flag of another tool: perftest's latency tests have no -q.
    Proc q(cmd("ibex_read_lat", {"-q", "2"}));
    Result qr = q.wait(10);
    EXPECT_EQ(qr.status, 1);
    EXPECT_NE(qr.err.find("option -q does not apply to ibex_read_lat"), std::string::npos) << qr.err;
    EXPECT_NE(qr.err.find("Usage:"), std::string::npos);
    Proc h(cmd("ibex_send_bw", {"-h"}));
    Result hr = h.wait(10);
    EXPECT_EQ(hr.status, 0);
    for (const char *flag : {"--report_gbits", "--report-both", "--run_infinitely", "--use_cuda", "--disable_numa",
                             "--json", "-r, --rx-depth", "-q, --qp", "-b, --bidirectional"})
        EXPECT_NE(hr.out.find(flag), std::string::npos) << flag;
}

TEST(PerftestErrors, UseCudaWithoutGpuFailsClearly) {
    // Without a GPU (or a CUDA build) each bandwidth tool says so at once instead of
    // measuring host memory under a GPU label. A client towards a closed port: with a
    // usable GPU it gets as far as connecting.
    for (const char *name : {"ibex_write_bw", "ibex_read_bw", "ibex_send_bw"}) {
        SCOPED_TRACE(name);
        Proc p(cmd(name, {"--use_cuda=0", "-p", std::to_string(free_port()), "127.0.0.1"}));
        const Result r = p.wait(20);
        if (r.err.find("cannot connect") != std::string::npos) GTEST_SKIP() << "this host has a usable GPU";
        expect_quick_failure(r, "--use_cuda", 10);
    }
}

TEST(PerftestErrors, MismatchedParametersFail) {
    const std::string port = std::to_string(free_port());
    Proc server(cmd("ibex_write_lat", {"-n", "50", "-p", port}));
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    Proc client(cmd("ibex_write_lat", {"-n", "60", "-p", port, "127.0.0.1"}));
    expect_quick_failure(client.wait(30), "different parameters", 10);
    expect_quick_failure(server.wait(30), "different parameters", 10);
}

} // namespace
} // namespace ibex::test::perftest
