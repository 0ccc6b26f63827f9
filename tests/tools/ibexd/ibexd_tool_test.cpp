// The built ibexd binary against fixture roots: flags, exit statuses, dry run, oneshot,
// restore, and the daemon's notify/reload/stop protocol.
#include "tests/tools/ibexd/fixture.h"

#include <csignal>
#include <fcntl.h>
#include <cstring>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

namespace ibex::tuning {
namespace {

using testing::Fixture;

std::string ibexd_path() {
    if (const char *b = std::getenv("IBEX_BUILD_DIR")) return std::string(b) + "/tools/ibexd/ibexd";
    return IBEXD_BINARY;
}

struct Proc {
    pid_t pid = -1;
    int out = -1; // read end of stdout+stderr
};

Proc spawn(const std::vector<std::string> &args, const std::vector<std::string> &env = {}) {
    int p[2];
    EXPECT_EQ(pipe2(p, O_CLOEXEC), 0);
    Proc pr;
    pr.pid = fork();
    if (pr.pid == 0) {
        dup2(p[1], 1);
        dup2(p[1], 2);
        for (const std::string &e : env) putenv(const_cast<char *>(e.c_str()));
        std::vector<char *> argv;
        std::string bin = ibexd_path();
        argv.push_back(bin.data());
        for (const std::string &a : args) argv.push_back(const_cast<char *>(a.c_str()));
        argv.push_back(nullptr);
        execv(bin.c_str(), argv.data());
        _exit(127);
    }
    close(p[1]);
    pr.out = p[0];
    return pr;
}

std::string drain(int fd) {
    std::string s;
    char buf[4096];
    ssize_t n;
    while ((n = read(fd, buf, sizeof buf)) > 0) s.append(buf, static_cast<size_t>(n));
    close(fd);
    return s;
}

int wait_rc(pid_t pid) {
    int st = 0;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

std::pair<int, std::string> run(const std::vector<std::string> &args, const std::vector<std::string> &env = {}) {
    Proc p = spawn(args, env);
    std::string out = drain(p.out);
    return {wait_rc(p.pid), out};
}

constexpr const char *kConfig = "reserved_cpus = 0-1,16-17\ndcqcn_profile = paper\n";

TEST(IbexdTool, BinaryExists) { ASSERT_EQ(access(ibexd_path().c_str(), X_OK), 0) << ibexd_path(); }

TEST(IbexdTool, UnknownFlagIsAUsageError) {
    auto [rc, out] = run({"--frobnicate"});
    EXPECT_EQ(rc, 2);
    EXPECT_NE(out.find("ibexd: unknown option '--frobnicate'"), std::string::npos) << out;
    EXPECT_NE(out.find("usage: ibexd"), std::string::npos);
    EXPECT_EQ(run({"--interval", "0"}).first, 2);
    EXPECT_EQ(run({"--config"}).first, 2);
    EXPECT_EQ(run({"--oneshot", "--dry-run"}).first, 2);
    auto [hrc, help] = run({"-h"});
    EXPECT_EQ(hrc, 0);
    EXPECT_NE(help.find("--restore"), std::string::npos);
}

TEST(IbexdTool, DryRunPrintsThePlanAndWritesNothing) {
    Fixture fx;
    fx.add_dgx_nics();
    auto before = fx.snapshot();
    auto [rc, out] = run({"--root", fx.root(), "--config", fx.config(kConfig), "--dry-run"});
    EXPECT_EQ(rc, 0) << out;
    EXPECT_TRUE(Fixture::diff(before, fx.snapshot()).empty());
    EXPECT_NE(out.find("ens1f0: numa node 0, local cpus 0-15, irq cpus 2-15, 8 queue irqs, 8 tx / 8 rx queues, "
                       "ecn knobs yes, dcqcn profile paper"),
              std::string::npos)
        << out;
    EXPECT_NE(out.find("/proc/irq/40/smp_affinity_list"), std::string::npos);
    EXPECT_NE(out.find("0-31 -> 2 "), std::string::npos) << out;
    EXPECT_NE(out.find("note: would write the irqbalance ban list to /run/ibexd/irqbalance.env"), std::string::npos);
    EXPECT_NE(out.find("ibexd: plan: 48 would change, 6 unchanged"), std::string::npos) << out;
}

TEST(IbexdTool, OneshotTunesAndRestoreUndoes) {
    Fixture fx;
    fx.add_dgx_nics();
    auto before = fx.snapshot();
    std::string conf = fx.config(kConfig);
    auto [rc, out] = run({"--root", fx.root(), "--config", conf, "--oneshot", "--state", "/var/lib/x/state"});
    EXPECT_EQ(rc, 0) << out;
    EXPECT_NE(out.find("ibexd: pass: 48 changed, 6 unchanged"), std::string::npos) << out;
    EXPECT_EQ(fx.read("/proc/irq/47/smp_affinity_list"), "9");
    EXPECT_EQ(fx.read("/sys/class/net/ens2f0/queues/tx-7/xps_cpus"), "80800000");
    EXPECT_EQ(fx.read("/sys/class/net/ens2f0/ecn/roce_np/enable/3"), "1");
    EXPECT_TRUE(std::filesystem::exists(fx.at("/var/lib/x/state")));

    // The NIC section no longer validates (say the NIC was pulled): restore still works.
    fx.config(std::string(kConfig) + "[interface gone0]\n");
    auto [rc2, out2] = run({"--root", fx.root(), "--config", conf, "--restore", "--state", "/var/lib/x/state"});
    EXPECT_NE(out2.find("ibexd: warning: "), std::string::npos) << out2;
    EXPECT_EQ(rc2, 0) << out2;
    EXPECT_NE(out2.find("ibexd: restore: 48 restored"), std::string::npos) << out2;
    EXPECT_TRUE(Fixture::diff(before, fx.snapshot()).empty());
}

TEST(IbexdTool, BadConfigIsRefusedAndNothingWritten) {
    Fixture fx;
    fx.add_dgx_nics();
    auto before = fx.snapshot();
    auto [rc, out] = run({"--root", fx.root(), "--config",
                          fx.config("reserved_cpus = 0-x\n[interface ens9]\ncnp_dscp = 70\n"), "--oneshot"});
    EXPECT_EQ(rc, 1);
    EXPECT_NE(out.find("reserved_cpus = '0-x': malformed CPU list element '0-x'"), std::string::npos) << out;
    EXPECT_NE(out.find("interface 'ens9' does not exist"), std::string::npos) << out;
    EXPECT_NE(out.find("cnp_dscp = 70: out of range [0, 63]"), std::string::npos) << out;
    EXPECT_NE(out.find("configuration rejected; nothing was changed"), std::string::npos) << out;
    EXPECT_TRUE(Fixture::diff(before, fx.snapshot()).empty());
}

TEST(IbexdTool, RefusedWriteIsPartialNotFatal) {
    Fixture fx;
    fx.add_dgx_nics();
    std::filesystem::remove(fx.at("/proc/irq/45/smp_affinity_list"));
    std::filesystem::create_directories(fx.at("/proc/irq/45/smp_affinity_list"));
    auto [rc, out] = run({"--root", fx.root(), "--config", fx.config(kConfig), "--oneshot"});
    EXPECT_EQ(rc, 3) << out;
    EXPECT_NE(out.find("FAILED"), std::string::npos) << out;
    EXPECT_NE(out.find("Is a directory"), std::string::npos) << out;
    EXPECT_EQ(fx.read("/proc/irq/65/smp_affinity_list"), "23");
}

TEST(IbexdTool, IrqbalanceRefuseExitsWithMessage) {
    Fixture fx;
    fx.add_dgx_nics();
    fx.add_irqbalance(5150);
    auto before = fx.snapshot();
    auto [rc, out] = run({"--root", fx.root(), "--config", fx.config("irqbalance = refuse\n"), "--oneshot"});
    EXPECT_EQ(rc, 1) << out;
    EXPECT_NE(out.find("irqbalance is running (pid 5150)"), std::string::npos) << out;
    EXPECT_TRUE(Fixture::diff(before, fx.snapshot()).empty());
}

class Datagrams {
public:
    explicit Datagrams(const std::string &path) : path_(path) {
        fd_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        sockaddr_un a{};
        a.sun_family = AF_UNIX;
        std::memcpy(a.sun_path, path.data(), path.size());
        EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr *>(&a), sizeof a), 0);
    }
    ~Datagrams() {
        close(fd_);
        unlink(path_.c_str());
    }
    // Waits for a datagram starting with prefix, skipping others (watchdog pings).
    std::string wait_for(const std::string &prefix, int timeout_ms = 10000) {
        for (int waited = 0; waited < timeout_ms; waited += 100) {
            pollfd p{fd_, POLLIN, 0};
            if (poll(&p, 1, 100) != 1) continue;
            char buf[4096];
            ssize_t n = recv(fd_, buf, sizeof buf, 0);
            std::string m(buf, n > 0 ? static_cast<size_t>(n) : 0);
            seen.push_back(m);
            if (m.starts_with(prefix)) return m;
        }
        return "";
    }
    std::vector<std::string> seen;

private:
    std::string path_;
    int fd_ = -1;
};

TEST(IbexdTool, DaemonNotifiesReloadsOnSighupAndStops) {
    Fixture fx;
    fx.add_dgx_nics();
    std::string sock = (fx.base() / "notify").string();
    Datagrams dg(sock);
    std::string conf = fx.config(kConfig);
    Proc p = spawn({"--root", fx.root(), "--config", conf, "--interval", "1"},
                   {"NOTIFY_SOCKET=" + sock, "WATCHDOG_USEC=400000"});
    EXPECT_NE(dg.wait_for("READY=1"), "");
    EXPECT_EQ(fx.read("/proc/irq/40/smp_affinity_list"), "2");
    EXPECT_EQ(dg.wait_for("WATCHDOG=1"), "WATCHDOG=1");

    // A periodic pass repairs what someone else changed.
    fx.file("/proc/irq/40/smp_affinity_list", "0-31");
    for (int i = 0; i < 50 && fx.read("/proc/irq/40/smp_affinity_list") != "2"; ++i) usleep(100000);
    EXPECT_EQ(fx.read("/proc/irq/40/smp_affinity_list"), "2");

    // Bad config on reload: kept the old one, still ready.
    fx.config("cnp_dscp = 99\n");
    kill(p.pid, SIGHUP);
    std::string reloading = dg.wait_for("RELOADING=1");
    EXPECT_NE(reloading.find("MONOTONIC_USEC="), std::string::npos) << reloading;
    EXPECT_NE(dg.wait_for("READY=1"), "");

    // Good config: swapped in and applied.
    fx.config("reserved_cpus = 0-3\n");
    kill(p.pid, SIGHUP);
    EXPECT_NE(dg.wait_for("RELOADING=1"), "");
    EXPECT_NE(dg.wait_for("READY=1"), "");
    EXPECT_EQ(fx.read("/proc/irq/40/smp_affinity_list"), "4");

    kill(p.pid, SIGTERM);
    EXPECT_EQ(dg.wait_for("STOPPING=1"), "STOPPING=1");
    int rc = wait_rc(p.pid);
    std::string out = drain(p.out);
    EXPECT_EQ(rc, 0) << out;
    EXPECT_NE(out.find("cnp_dscp = 99: out of range [0, 63]"), std::string::npos) << out;
    EXPECT_NE(out.find("ibexd: reload: kept the previous config"), std::string::npos) << out;
    EXPECT_NE(out.find("ibexd: reload: new config in effect"), std::string::npos) << out;
}

} // namespace
} // namespace ibex::tuning
