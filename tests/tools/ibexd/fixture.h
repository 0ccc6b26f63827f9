// A fake /sys and /proc tree in a temp dir, shaped like the real one (class/net links
// into /sys/devices, device -> PCI function), for ibexd's tests.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace ibex::tuning::testing {

namespace fs = std::filesystem;

struct NicSpec {
    std::string name;
    std::string pci;        // "0000:17:00.0"
    int numa = 0;
    std::string local_cpulist;
    unsigned first_irq = 0; // queue IRQs first_irq .. first_irq+irqs-1; first_irq-1 is async
    unsigned irqs = 8;
    unsigned tx = 8;
    unsigned rx = 8;
    bool ecn = true;
    bool rdma = true;
};

class Fixture {
public:
    Fixture() {
        std::string tmpl = (fs::temp_directory_path() / "ibexd-fixture-XXXXXX").string();
        char *d = mkdtemp(tmpl.data());
        EXPECT_NE(d, nullptr);
        base_ = d;
        root_ = base_ / "root";
        fs::create_directories(root_);
        file("/sys/devices/system/cpu/online", "0-31");
    }
    ~Fixture() {
        std::error_code ec;
        fs::remove_all(base_, ec);
    }
    Fixture(const Fixture &) = delete;
    Fixture &operator=(const Fixture &) = delete;

    const fs::path &base() const { return base_; } // outside the root: config, escapes
    std::string root() const { return root_.string(); }
    fs::path at(const std::string &host_path) const { return root_ / host_path.substr(1); }

    void file(const std::string &host_path, const std::string &content) {
        fs::path p = at(host_path);
        fs::create_directories(p.parent_path());
        std::ofstream(p) << content << "\n";
    }
    std::string read(const std::string &host_path) const {
        std::ifstream f(at(host_path));
        std::stringstream ss;
        ss << f.rdbuf();
        std::string s = ss.str();
        while (!s.empty() && s.back() == '\n') s.pop_back();
        return s;
    }
    void symlink(const std::string &host_path, const std::string &target) {
        fs::create_directories(at(host_path).parent_path());
        fs::create_symlink(target, at(host_path));
    }

    void add_nic(const NicSpec &n) {
        const std::string dev = "/sys/devices/pci0000:00/" + n.pci;
        const std::string net = dev + "/net/" + n.name;
        file(dev + "/numa_node", std::to_string(n.numa));
        file(dev + "/local_cpulist", n.local_cpulist);
        if (n.rdma) fs::create_directories(at(dev + "/infiniband/mlx5_" + std::to_string(nics_.size())));
        // One async (control) vector before the completion vectors, as mlx5 has.
        for (unsigned i = 0; i <= n.irqs; ++i) {
            unsigned irq = n.first_irq - 1 + i;
            file(dev + "/msi_irqs/" + std::to_string(irq), "msix");
            file("/proc/irq/" + std::to_string(irq) + "/smp_affinity_list", "0-31");
            interrupts_.push_back({irq, i == 0 ? "mlx5_async" + std::to_string(nics_.size()) + "@pci:" + n.pci
                                              : "mlx5_comp" + std::to_string(i - 1) + "@pci:" + n.pci});
        }
        for (unsigned q = 0; q < n.tx; ++q) file(net + "/queues/tx-" + std::to_string(q) + "/xps_cpus", "00000000");
        for (unsigned q = 0; q < n.rx; ++q) file(net + "/queues/rx-" + std::to_string(q) + "/rps_cpus", "00000000");
        if (n.ecn) {
            for (std::string side : {"roce_np", "roce_rp"})
                for (int p = 0; p < 8; ++p) file(net + "/ecn/" + side + "/enable/" + std::to_string(p), "0");
            // mlx5 firmware defaults.
            std::map<std::string, std::string> rp = {
                {"rpg_time_reset", "300"},   {"rpg_byte_reset", "32767"}, {"rpg_ai_rate", "5"},
                {"rpg_hai_rate", "50"},      {"rpg_gd", "11"},            {"rpg_min_dec_fac", "50"},
                {"rpg_min_rate", "1"},       {"initial_alpha_value", "1023"}, {"dce_tcp_g", "1019"},
                {"dce_tcp_rtt", "1"},        {"rpg_threshold", "1"}};
            for (auto &[k, v] : rp) file(net + "/ecn/roce_rp/" + k, v);
            file(net + "/ecn/roce_np/min_time_between_cnps", "4");
            file(net + "/ecn/roce_np/cnp_dscp", "48");
            file(net + "/ecn/roce_np/cnp_802p_prio", "6");
        }
        symlink(net + "/device", "../../../" + n.pci);
        symlink("/sys/class/net/" + n.name, "../../devices/pci0000:00/" + n.pci + "/net/" + n.name);
        nics_.push_back(n);
        write_interrupts();
    }

    // Two sockets of 16 cores, a NIC on each: the DGX-like shape, reduced.
    void add_dgx_nics() {
        add_nic({"ens1f0", "0000:17:00.0", 0, "0-15", 40, 8, 8, 8, true, true});
        add_nic({"ens2f0", "0000:b5:00.0", 1, "16-31", 60, 8, 8, 8, true, true});
    }

    void add_irqbalance(int pid) { file("/proc/" + std::to_string(pid) + "/comm", "irqbalance"); }

    std::string config(const std::string &text, const std::string &name = "ibexd.conf") {
        fs::path p = base_ / name;
        std::ofstream(p) << text;
        return p.string();
    }

    // Every regular file under the root with its contents, to prove what changed.
    std::map<std::string, std::string> snapshot() const {
        std::map<std::string, std::string> out;
        for (auto &e : fs::recursive_directory_iterator(root_)) {
            if (!e.is_regular_file() || e.is_symlink()) continue;
            std::ifstream f(e.path());
            std::stringstream ss;
            ss << f.rdbuf();
            out["/" + fs::relative(e.path(), root_).string()] = ss.str();
        }
        return out;
    }
    // Files whose contents differ (or that appeared/disappeared) between two snapshots.
    static std::map<std::string, std::string> diff(const std::map<std::string, std::string> &a,
                                                   const std::map<std::string, std::string> &b) {
        std::map<std::string, std::string> d;
        for (auto &[k, v] : b) {
            auto it = a.find(k);
            if (it == a.end() || it->second != v) d[k] = v;
        }
        for (auto &[k, v] : a)
            if (!b.count(k)) d[k] = "<removed>";
        return d;
    }

private:
    void write_interrupts() {
        std::string s = "           CPU0       CPU1\n";
        for (auto &[irq, name] : interrupts_)
            s += "  " + std::to_string(irq) + ":          0          0  IR-PCI-MSI 9437184-edge      " + name + "\n";
        s += "NMI:          0          0   Non-maskable interrupts";
        file("/proc/interrupts", s);
    }

    fs::path base_;
    fs::path root_;
    std::vector<NicSpec> nics_;
    std::vector<std::pair<unsigned, std::string>> interrupts_;
};

} // namespace ibex::tuning::testing
