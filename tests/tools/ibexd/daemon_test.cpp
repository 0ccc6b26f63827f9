// Reload semantics, irqbalance coexistence and the systemd notify protocol.
#include "tests/tools/ibexd/fixture.h"

#include "tools/ibexd/daemon.h"
#include "tools/ibexd/irqbalance.h"
#include "runtime/base/rootfs.h"
#include "tools/ibexd/sd_notify.h"

#include <cstring>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

namespace ibex::tuning {
namespace {

using testing::Fixture;

TEST(Reload, KeepsTheOldConfigWhenTheNewOneIsBad) {
    Fixture fx;
    fx.add_dgx_nics();
    RootFs fs(fx.root());
    std::string path = fx.config("reserved_cpus = 0-1\ndcqcn_profile = paper\n");
    Daemon d(fs, {path, "", 0, false});
    std::vector<std::string> errors;
    ASSERT_TRUE(d.load(errors));

    fx.config("reserved_cpus = 0-1\nrpg_ai_rate = 999999999\n[interface ens7]\n");
    errors.clear();
    EXPECT_FALSE(d.reload(errors));
    ASSERT_EQ(errors.size(), 2u);
    EXPECT_NE(errors[0].find("rpg_ai_rate = 999999999: out of range"), std::string::npos) << errors[0];
    EXPECT_EQ(d.config().reserved_cpus.to_list(), "0-1");
    EXPECT_EQ(d.config().defaults.dcqcn_profile, "paper");
    // The kept config still drives passes.
    PassReport rep = d.run_pass(false);
    EXPECT_TRUE(rep.result.ok());
    EXPECT_EQ(fx.read("/sys/class/net/ens1f0/ecn/roce_rp/rpg_ai_rate"), "40");

    // A valid new config is swapped in.
    fx.config("reserved_cpus = 0-3\ndcqcn_profile = mlx5\n");
    errors.clear();
    EXPECT_TRUE(d.reload(errors));
    EXPECT_EQ(d.config().reserved_cpus.to_list(), "0-3");
    d.run_pass(false);
    EXPECT_EQ(fx.read("/sys/class/net/ens1f0/ecn/roce_rp/rpg_ai_rate"), "5");
    EXPECT_EQ(fx.read("/proc/irq/40/smp_affinity_list"), "4");

    // A config that disappeared is also "bad".
    std::filesystem::remove(path);
    errors.clear();
    EXPECT_FALSE(d.reload(errors));
    EXPECT_NE(errors.at(0).find("cannot open the config file"), std::string::npos);
    EXPECT_EQ(d.config().reserved_cpus.to_list(), "0-3");
}

TEST(Irqbalance, DetectedByProcComm) {
    Fixture fx;
    fx.file("/proc/1/comm", "systemd");
    fx.file("/proc/77/comm", "irqbalance");
    fx.file("/proc/self/comm", "irqbalance"); // not a pid directory
    RootFs fs(fx.root());
    EXPECT_EQ(find_irqbalance(fs), std::vector<int>{77});
}

TEST(Irqbalance, RefusePolicyExitsWithAClearMessageAndWritesNothing) {
    Fixture fx;
    fx.add_dgx_nics();
    fx.add_irqbalance(812);
    RootFs fs(fx.root());
    auto before = fx.snapshot();
    Daemon d(fs, {fx.config("irqbalance = refuse\n"), "", 0, false});
    std::vector<std::string> errors;
    ASSERT_TRUE(d.load(errors));
    PassReport rep = d.run_pass(false);
    EXPECT_TRUE(rep.refused);
    ASSERT_EQ(rep.result.errors.size(), 1u);
    EXPECT_NE(rep.result.errors[0].find("irqbalance is running (pid 812)"), std::string::npos) << rep.result.errors[0];
    EXPECT_NE(rep.result.errors[0].find("set irqbalance = ban"), std::string::npos);
    EXPECT_TRUE(Fixture::diff(before, fx.snapshot()).empty());
}

TEST(Irqbalance, BanPolicyWritesTheHintFileAndTunes) {
    Fixture fx;
    fx.add_nic({"ens1f0", "0000:17:00.0", 0, "0-3", 40, 2, 1, 1, false, true});
    fx.add_irqbalance(812);
    RootFs fs(fx.root());
    Daemon d(fs, {fx.config("irqbalance = ban\nirqbalance_ban_file = /etc/ibexd/ban.env\n"), "", 0, false});
    std::vector<std::string> errors;
    ASSERT_TRUE(d.load(errors));
    PassReport rep = d.run_pass(false);
    EXPECT_FALSE(rep.refused);
    EXPECT_TRUE(rep.result.ok());
    std::string ban = fx.read("/etc/ibexd/ban.env");
    EXPECT_NE(ban.find("EnvironmentFile=-/etc/ibexd/ban.env"), std::string::npos) << ban;
    EXPECT_NE(ban.find("\nIRQBALANCE_ARGS=\"--banirq=40 --banirq=41\""), std::string::npos) << ban;
    EXPECT_EQ(ban.find("IRQBALANCE_BANNED_CPULIST"), std::string::npos) << ban; // nothing reserved
    bool told = false;
    for (auto &n : rep.plan.notes) told |= n.find("irqbalance is running (pid 812)") != std::string::npos;
    EXPECT_TRUE(told);
    EXPECT_EQ(fx.read("/proc/irq/41/smp_affinity_list"), "1");
}

class NotifySocket {
public:
    explicit NotifySocket(const std::string &path) : path_(path) {
        fd_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        sockaddr_un a{};
        a.sun_family = AF_UNIX;
        std::memcpy(a.sun_path, path.data(), path.size());
        socklen_t len = offsetof(sockaddr_un, sun_path) + path.size() + 1;
        if (path[0] == '@') {
            a.sun_path[0] = '\0';
            --len;
        }
        EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr *>(&a), len), 0) << strerror(errno);
    }
    ~NotifySocket() {
        close(fd_);
        if (path_[0] == '/') unlink(path_.c_str());
    }
    // The next datagram, or "" after timeout_ms.
    std::string recv(int timeout_ms = 5000) {
        pollfd p{fd_, POLLIN, 0};
        if (poll(&p, 1, timeout_ms) != 1) return "";
        char buf[4096];
        ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
        return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
    }

private:
    std::string path_;
    int fd_ = -1;
};

TEST(SdNotify, SendsDatagramsToAPathSocket) {
    Fixture fx;
    std::string path = (fx.base() / "notify.sock").string();
    NotifySocket sock(path);
    Notifier n(path, 0);
    ASSERT_TRUE(n.enabled());
    EXPECT_EQ(n.ready("tuning 2"), 0);
    EXPECT_EQ(sock.recv(), "READY=1\nSTATUS=tuning 2");
    EXPECT_EQ(n.reloading(), 0);
    std::string m = sock.recv();
    ASSERT_TRUE(m.starts_with("RELOADING=1\nMONOTONIC_USEC=")) << m;
    uint64_t usec = std::stoull(m.substr(m.find('=', 12) + 1));
    uint64_t now = Notifier::monotonic_usec();
    EXPECT_LE(usec, now);
    EXPECT_GT(usec + 5000000, now);
    EXPECT_EQ(n.watchdog(), 0);
    EXPECT_EQ(sock.recv(), "WATCHDOG=1");
    EXPECT_EQ(n.stopping(), 0);
    EXPECT_EQ(sock.recv(), "STOPPING=1");
}

TEST(SdNotify, AbstractSocketAndEnvironment) {
    std::string name = "@ibexd-test-" + std::to_string(getpid());
    NotifySocket sock(name);
    setenv("NOTIFY_SOCKET", name.c_str(), 1);
    setenv("WATCHDOG_USEC", "3000000", 1);
    unsetenv("WATCHDOG_PID");
    Notifier n = Notifier::from_env();
    EXPECT_EQ(n.watchdog_interval_usec(), 1500000u);
    EXPECT_EQ(n.ready(), 0);
    EXPECT_EQ(sock.recv(), "READY=1");
    // A watchdog meant for another process is not ours to pet.
    setenv("WATCHDOG_PID", "1", 1);
    EXPECT_EQ(Notifier::from_env().watchdog_interval_usec(), 0u);
    unsetenv("NOTIFY_SOCKET");
    unsetenv("WATCHDOG_USEC");
    unsetenv("WATCHDOG_PID");
    Notifier off = Notifier::from_env();
    EXPECT_FALSE(off.enabled());
    EXPECT_EQ(off.ready(), 0);
}

} // namespace
} // namespace ibex::tuning
