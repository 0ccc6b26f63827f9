// Planner and applier against a fixture root: exact files written, dry run, restore,
// refused writes, path escapes.
#include "tests/tools/ibexd/fixture.h"

#include "tools/ibexd/applier.h"
#include "tools/ibexd/daemon.h"
#include "tools/ibexd/planner.h"
#include "runtime/base/rootfs.h"

#include <cerrno>

namespace ibex::tuning {
namespace {

using testing::Fixture;

constexpr const char *kDgxConfig = R"([global]
reserved_cpus = 0-1,16-17
dcqcn_profile = paper
)";

Config parse_ok(Fixture &fx, const std::string &text) {
    RootFs fs(fx.root());
    Config c;
    std::vector<std::string> errors;
    EXPECT_TRUE(load_config(fx.config(text), fs, c, errors)) << (errors.empty() ? "" : errors[0]);
    return c;
}

// What the DGX-like fixture must look like after one pass of kDgxConfig.
std::map<std::string, std::string> expected_dgx_changes() {
    std::map<std::string, std::string> want;
    // Queue IRQs round-robin over NIC-local cores minus the reserved ones; the async
    // vectors (39, 59) are left alone.
    for (unsigned i = 0; i < 8; ++i) {
        want["/proc/irq/" + std::to_string(40 + i) + "/smp_affinity_list"] = std::to_string(2 + i) + "\n";
        want["/proc/irq/" + std::to_string(60 + i) + "/smp_affinity_list"] = std::to_string(18 + i) + "\n";
    }
    const char *xps0[] = {"101", "202", "404", "808", "1010", "2020", "4040", "8080"};
    const char *xps1[] = {"1010000", "2020000", "4040000", "8080000",
                          "10100000", "20200000", "40400000", "80800000"};
    for (unsigned q = 0; q < 8; ++q) {
        want["/sys/devices/pci0000:00/0000:17:00.0/net/ens1f0/queues/tx-" + std::to_string(q) + "/xps_cpus"] =
            std::string(xps0[q]) + "\n";
        want["/sys/devices/pci0000:00/0000:b5:00.0/net/ens2f0/queues/tx-" + std::to_string(q) + "/xps_cpus"] =
            std::string(xps1[q]) + "\n";
    }
    for (std::string net : {"/sys/devices/pci0000:00/0000:17:00.0/net/ens1f0",
                            "/sys/devices/pci0000:00/0000:b5:00.0/net/ens2f0"}) {
        want[net + "/ecn/roce_np/enable/3"] = "1\n";
        want[net + "/ecn/roce_rp/enable/3"] = "1\n";
        // The paper profile, only where it differs from the mlx5 defaults.
        want[net + "/ecn/roce_np/min_time_between_cnps"] = "50\n";
        want[net + "/ecn/roce_rp/dce_tcp_rtt"] = "55\n";
        want[net + "/ecn/roce_rp/dce_tcp_g"] = "1020\n";
        want[net + "/ecn/roce_rp/rpg_time_reset"] = "55\n";
        want[net + "/ecn/roce_rp/rpg_threshold"] = "5\n";
        want[net + "/ecn/roce_rp/rpg_ai_rate"] = "40\n";
    }
    return want;
}

// Drops ibexd's own bookkeeping files from a diff.
std::map<std::string, std::string> device_changes(std::map<std::string, std::string> d) {
    d.erase("/var/lib/ibexd/state");
    d.erase("/run/ibexd/irqbalance.env");
    return d;
}

TEST(Planner, ParsesProcInterrupts) {
    auto v = parse_proc_interrupts("           CPU0       CPU1\n"
                                   " 45:   1   2  IR-PCI-MSI 9437184-edge      mlx5_comp0@pci:0000:17:00.0\n"
                                   "NMI:   0   0  Non-maskable interrupts\n"
                                   "  9:   0   0  IO-APIC   9-fasteoi   acpi\n");
    ASSERT_EQ(v.size(), 2u);
    EXPECT_EQ(v[0].first, 45u);
    EXPECT_EQ(v[0].second, "mlx5_comp0@pci:0000:17:00.0");
    EXPECT_EQ(v[1].second, "acpi");
}

TEST(Planner, PlansIrqsXpsEcnAndDcqcnPerNic) {
    Fixture fx;
    fx.add_dgx_nics();
    Config c = parse_ok(fx, kDgxConfig);
    RootFs fs(fx.root());
    Plan p = make_plan(c, fs);
    ASSERT_EQ(p.nics.size(), 2u);
    EXPECT_EQ(p.nics[0].name, "ens1f0");
    EXPECT_EQ(p.nics[0].irq_cpus.to_list(), "2-15");
    EXPECT_EQ(p.nics[1].irq_cpus.to_list(), "18-31");
    EXPECT_EQ(p.nics[1].numa_node, 1);
    EXPECT_EQ(p.nics[0].queue_irqs, 8u);
    EXPECT_EQ(p.managed_irqs.size(), 16u);
    // 8 IRQs + 8 XPS + 2 ECN enables + 9 paper knobs, per NIC.
    EXPECT_EQ(p.writes.size(), 2u * 27u);
    EXPECT_TRUE(p.notes.empty()) << p.notes[0];
}

TEST(Planner, SpreadsNicsThatShareCores) {
    Fixture fx;
    fx.add_nic({"ens1f0", "0000:17:00.0", 0, "0-3", 40, 4, 1, 1, false, true});
    fx.add_nic({"ens1f1", "0000:17:00.1", 0, "0-3", 60, 4, 1, 1, false, true});
    Config c = parse_ok(fx, "reserved_cpus = 0\n");
    RootFs fs(fx.root());
    Plan p = make_plan(c, fs);
    std::vector<std::string> irq_values;
    for (const Write &w : p.writes)
        if (w.kind == ValueKind::cpulist) irq_values.push_back(w.value);
    // Round-robin over 1-3 for each NIC, the second NIC starting where load is lowest.
    EXPECT_EQ(irq_values, (std::vector<std::string>{"1", "2", "3", "1", "2", "3", "1", "2"}));
    ASSERT_EQ(p.notes.size(), 2u);
    EXPECT_NE(p.notes[0].find("no ecn/roce_np"), std::string::npos);
}

TEST(Applier, WritesExactlyThePlannedFilesAndRecordsOriginals) {
    Fixture fx;
    fx.add_dgx_nics();
    Config c = parse_ok(fx, kDgxConfig);
    RootFs fs(fx.root());
    auto before = fx.snapshot();
    Applier a(fs, "/var/lib/ibexd/state");
    PassResult r = a.apply(make_plan(c, fs));
    EXPECT_TRUE(r.ok()) << (r.errors.empty() ? "" : r.errors[0]);
    EXPECT_EQ(r.count(Action::changed), 48u);
    EXPECT_EQ(r.count(Action::unchanged), 6u); // rpg_byte_reset, initial_alpha_value, cnp_dscp x2
    auto changes = Fixture::diff(before, fx.snapshot());
    ASSERT_TRUE(changes.count("/var/lib/ibexd/state"));
    EXPECT_EQ(device_changes(changes), expected_dgx_changes());
    // Originals recorded, in write order.
    const std::string state = changes["/var/lib/ibexd/state"];
    EXPECT_NE(state.find("/proc/irq/40/smp_affinity_list\t0-31\n"), std::string::npos) << state;
    EXPECT_NE(state.find("/sys/class/net/ens2f0/ecn/roce_rp/rpg_ai_rate\t5\n"), std::string::npos) << state;
    EXPECT_EQ(a.state().entries().size(), 48u);

    // A second pass (and a restarted daemon) finds nothing to do and keeps the originals.
    Applier again(fs, "/var/lib/ibexd/state");
    PassResult r2 = again.apply(make_plan(c, fs));
    EXPECT_EQ(r2.count(Action::changed), 0u);
    EXPECT_EQ(r2.count(Action::unchanged), 54u);
    EXPECT_EQ(fx.read("/var/lib/ibexd/state") + "\n", state);
}

TEST(Applier, DryRunWritesNothing) {
    Fixture fx;
    fx.add_dgx_nics();
    Config c = parse_ok(fx, kDgxConfig);
    RootFs fs(fx.root());
    auto before = fx.snapshot();
    Daemon d(fs, {fx.config(kDgxConfig), "", 0, false});
    std::vector<std::string> errors;
    ASSERT_TRUE(d.load(errors));
    PassReport rep = d.run_pass(true);
    EXPECT_EQ(rep.result.count(Action::would_change), 48u);
    EXPECT_EQ(rep.result.count(Action::changed), 0u);
    EXPECT_TRUE(Fixture::diff(before, fx.snapshot()).empty());
}

TEST(Applier, RestorePutsEveryOriginalBack) {
    Fixture fx;
    fx.add_dgx_nics();
    fx.add_irqbalance(4242);
    RootFs fs(fx.root());
    auto before = fx.snapshot();
    Daemon d(fs, {fx.config(kDgxConfig), "", 0, false});
    std::vector<std::string> errors;
    ASSERT_TRUE(d.load(errors));
    PassReport rep = d.run_pass(false);
    ASSERT_TRUE(rep.result.ok());
    EXPECT_EQ(fx.read("/run/ibexd/irqbalance.env").substr(fx.read("/run/ibexd/irqbalance.env").find("IRQBALANCE_BANNED")),
              "IRQBALANCE_BANNED_CPULIST=0-1,16-17\n"
              "IRQBALANCE_ARGS=\"--banirq=40 --banirq=41 --banirq=42 --banirq=43 --banirq=44 --banirq=45 "
              "--banirq=46 --banirq=47 --banirq=60 --banirq=61 --banirq=62 --banirq=63 --banirq=64 "
              "--banirq=65 --banirq=66 --banirq=67\"");
    EXPECT_FALSE(Fixture::diff(before, fx.snapshot()).empty());

    PassResult r = d.restore();
    EXPECT_EQ(r.count(Action::restored), 48u);
    EXPECT_TRUE(r.errors.empty()) << r.errors[0];
    // Everything back, state and ban files gone.
    EXPECT_TRUE(Fixture::diff(before, fx.snapshot()).empty());
}

// A RootFs whose "kernel" refuses writes to chosen files with a chosen errno.
class RefusingFs : public RootFs {
public:
    using RootFs::RootFs;
    std::map<std::string, int> refuse;
    int write_file(std::string_view path, std::string_view value) override {
        auto it = refuse.find(std::string(path));
        if (it != refuse.end()) return it->second;
        return RootFs::write_file(path, value);
    }
};

TEST(Applier, RefusedWriteIsReportedRetriedAndOtherNicsStillTuned) {
    Fixture fx;
    fx.add_dgx_nics();
    Config c = parse_ok(fx, kDgxConfig);
    RefusingFs fs(fx.root());
    fs.refuse["/proc/irq/41/smp_affinity_list"] = EINVAL;                     // transient
    fs.refuse["/sys/class/net/ens1f0/ecn/roce_rp/rpg_ai_rate"] = EIO;         // permanent
    Applier a(fs, "/var/lib/ibexd/state");
    PassResult r = a.apply(make_plan(c, fs));
    EXPECT_FALSE(r.ok());
    EXPECT_EQ(r.count(Action::retry), 1u);
    EXPECT_EQ(r.count(Action::failed), 1u);
    EXPECT_EQ(r.count(Action::changed), 46u);
    for (const Outcome &o : r.outcomes) {
        if (o.write.path == "/proc/irq/41/smp_affinity_list") {
            EXPECT_EQ(o.action, Action::retry);
            EXPECT_NE(o.detail.find("kernel refused 3: Invalid argument (errno 22)"), std::string::npos) << o.detail;
        }
        if (o.write.iface == "ens2f0") {
            EXPECT_TRUE(o.action == Action::changed || o.action == Action::unchanged);
        }
    }
    EXPECT_EQ(fx.read("/proc/irq/41/smp_affinity_list"), "0-31");
    EXPECT_EQ(fx.read("/proc/irq/60/smp_affinity_list"), "18");

    // Next pass: the transient one is retried and now succeeds; the permanent one is not
    // tried again until a reload.
    fs.refuse.erase("/proc/irq/41/smp_affinity_list");
    fs.refuse.erase("/sys/class/net/ens1f0/ecn/roce_rp/rpg_ai_rate");
    PassResult r2 = a.apply(make_plan(c, fs));
    EXPECT_EQ(r2.count(Action::changed), 1u);
    EXPECT_EQ(r2.count(Action::skipped), 1u);
    EXPECT_EQ(fx.read("/proc/irq/41/smp_affinity_list"), "3");
    EXPECT_EQ(fx.read("/sys/class/net/ens1f0/ecn/roce_rp/rpg_ai_rate"), "5");
    a.forget_failures();
    PassResult r3 = a.apply(make_plan(c, fs));
    EXPECT_EQ(r3.count(Action::changed), 1u);
    EXPECT_TRUE(r3.ok());
    EXPECT_EQ(fx.read("/sys/class/net/ens1f0/ecn/roce_rp/rpg_ai_rate"), "40");
}

TEST(Applier, FileThatCannotBeWrittenDoesNotStopOtherNics) {
    Fixture fx;
    fx.add_dgx_nics();
    // An attribute that is a directory: neither readable nor writable as a value.
    std::filesystem::remove(fx.at("/proc/irq/42/smp_affinity_list"));
    std::filesystem::create_directories(fx.at("/proc/irq/42/smp_affinity_list"));
    std::filesystem::remove(fx.at("/sys/devices/pci0000:00/0000:17:00.0/net/ens1f0/ecn/roce_np/enable/3"));
    std::filesystem::create_directories(fx.at("/sys/devices/pci0000:00/0000:17:00.0/net/ens1f0/ecn/roce_np/enable/3"));
    Config c = parse_ok(fx, kDgxConfig);
    RootFs fs(fx.root());
    Applier a(fs, "/var/lib/ibexd/state");
    PassResult r = a.apply(make_plan(c, fs));
    EXPECT_EQ(r.count(Action::failed), 2u);
    EXPECT_EQ(r.count(Action::changed), 46u);
    for (const Outcome &o : r.outcomes) {
        if (o.action == Action::failed) {
            EXPECT_NE(o.detail.find("Is a directory"), std::string::npos) << o.detail;
        }
    }
    EXPECT_EQ(fx.read("/proc/irq/67/smp_affinity_list"), "25");
    EXPECT_EQ(fx.read("/sys/class/net/ens1f0/ecn/roce_rp/enable/3"), "1");
}

TEST(RootFsTest, RefusesPathsThatEscapeTheRoot) {
    Fixture fx;
    fx.add_dgx_nics();
    std::ofstream(fx.base() / "outside") << "secret\n";
    fx.symlink("/sys/escape", "../../outside");
    fx.symlink("/sys/abs_escape", (fx.base() / "outside").string());
    fx.symlink("/sys/dangling", (fx.base() / "nonexistent").string());
    RefusingFs fs(fx.root());
    std::string real, out;
    EXPECT_EQ(fs.resolve("/sys/../../outside", real), RootFs::kEscapesRoot);
    EXPECT_EQ(fs.resolve("/proc/irq/40/../../../../outside", real), RootFs::kEscapesRoot);
    EXPECT_EQ(fs.resolve("relative/path", real), RootFs::kBadPath);
    EXPECT_EQ(fs.write_file("/sys/escape", "x"), RootFs::kEscapesRoot);
    EXPECT_EQ(fs.write_file("/sys/abs_escape", "x"), RootFs::kEscapesRoot);
    EXPECT_EQ(fs.read_file("/sys/abs_escape", out), RootFs::kEscapesRoot);
    EXPECT_EQ(fs.replace_file("/sys/dangling", "x"), RootFs::kEscapesRoot);
    EXPECT_EQ(fs.replace_file("/sys/escape/sub/file", "x"), RootFs::kEscapesRoot);
    // In-root symlinks (sysfs is full of them) are fine.
    EXPECT_EQ(fs.resolve("/sys/class/net/ens1f0/device/local_cpulist", real), 0);
    EXPECT_EQ(real, fx.at("/sys/devices/pci0000:00/0000:17:00.0/local_cpulist").string());
    EXPECT_NE(RootFs::describe(RootFs::kEscapesRoot).find("escapes the root"), std::string::npos);

    // A sysfs attribute replaced by a link to outside: refused, reported, the rest tuned.
    std::filesystem::remove(fx.at("/proc/irq/44/smp_affinity_list"));
    fx.symlink("/proc/irq/44/smp_affinity_list", (fx.base() / "outside").string());
    Config c = parse_ok(fx, kDgxConfig);
    Applier a(fs, "/var/lib/ibexd/state");
    PassResult r = a.apply(make_plan(c, fs));
    EXPECT_EQ(r.count(Action::failed), 1u);
    EXPECT_EQ(r.count(Action::changed), 47u);
    for (const Outcome &o : r.outcomes) {
        if (o.action == Action::failed) {
            EXPECT_NE(o.detail.find("escapes the root"), std::string::npos) << o.detail;
        }
    }
    std::ifstream f(fx.base() / "outside");
    std::string secret;
    std::getline(f, secret);
    EXPECT_EQ(secret, "secret");
}

TEST(Applier, StateFileOutsideTheRootIsRefusedAndNothingWritten) {
    Fixture fx;
    fx.add_dgx_nics();
    fx.symlink("/var/lib/ibexd", fx.base().string());
    Config c = parse_ok(fx, kDgxConfig);
    RootFs fs(fx.root());
    auto before = fx.snapshot();
    Applier a(fs, "/var/lib/ibexd/state");
    PassResult r = a.apply(make_plan(c, fs));
    ASSERT_FALSE(r.errors.empty());
    EXPECT_NE(r.errors[0].find("escapes the root"), std::string::npos) << r.errors[0];
    EXPECT_EQ(r.count(Action::changed), 0u);
    EXPECT_TRUE(Fixture::diff(before, fx.snapshot()).empty());
    EXPECT_FALSE(std::filesystem::exists(fx.base() / "state"));
}

TEST(Applier, NicsComeAndGoBetweenPasses) {
    Fixture fx;
    fx.add_nic({"ens1f0", "0000:17:00.0", 0, "0-15", 40, 2, 1, 1, false, true});
    Config c = parse_ok(fx, "[interface ens1f0]\n");
    RootFs fs(fx.root());
    Applier a(fs, "/var/lib/ibexd/state");
    EXPECT_TRUE(a.apply(make_plan(c, fs)).ok());
    std::filesystem::remove(fx.at("/sys/class/net/ens1f0"));
    Plan gone = make_plan(c, fs);
    EXPECT_TRUE(gone.writes.empty());
    ASSERT_FALSE(gone.notes.empty());
    EXPECT_NE(gone.notes[0].find("ens1f0: not present; skipped"), std::string::npos);
    // A hot-plugged RDMA NIC is picked up by discovery on the next pass.
    fx.add_nic({"ens3f0", "0000:31:00.0", 0, "0-15", 80, 2, 1, 1, false, true});
    Plan more = make_plan(c, fs);
    ASSERT_EQ(more.nics.size(), 1u);
    EXPECT_EQ(more.nics[0].name, "ens3f0");
}

} // namespace
} // namespace ibex::tuning
