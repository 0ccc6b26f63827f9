#include "tools/ibexd/planner.h"

#include "runtime/base/cpuset.h"
#include "runtime/base/rootfs.h"

#include <algorithm>
#include <map>
#include <set>

namespace ibex::tuning {
namespace {

// Interrupts that are not a queue's: mlx5's async/command/page EQs, other drivers'
// misc/control vectors. Moving them is harmless but they carry no traffic.
bool is_queue_irq(std::string_view name) {
    for (std::string_view k : {"async", "_cmd", "pages", "misc", "ctrl", "-fw"})
        if (name.find(k) != std::string_view::npos) return false;
    return true;
}

// Queue indices under queues/ with the given prefix ("tx-"), numerically sorted.
std::vector<unsigned> queue_indices(const RootFs &fs, const std::string &dir, std::string_view prefix) {
    std::vector<std::string> names;
    std::vector<unsigned> out;
    if (fs.list_dir(dir, names) != 0) return out;
    for (const std::string &n : names) {
        unsigned i;
        if (std::string_view(n).starts_with(prefix) && parse_uint(std::string_view(n).substr(prefix.size()), i))
            out.push_back(i);
    }
    std::sort(out.begin(), out.end());
    return out;
}

// Picks IRQ cores so that a NIC walks its own cores round-robin while the NICs that
// share cores (same NUMA node) do not all start on the first one: the least loaded core
// wins, ties go to the next in this NIC's round-robin order.
class CoreSpreader {
public:
    unsigned pick(const CpuSet &allowed, size_t &cursor) {
        const auto &c = allowed.cpus();
        size_t best = cursor % c.size();
        for (size_t k = 0; k < c.size(); ++k) {
            size_t i = (cursor + k) % c.size();
            if (load_[c[i]] < load_[c[best]]) best = i;
        }
        cursor = best + 1;
        ++load_[c[best]];
        return c[best];
    }

private:
    std::map<unsigned, unsigned> load_;
};

// Present, or a link out of the root. The latter is planned anyway so that the applier
// reports the refusal instead of the file silently not being tuned.
bool plannable(const RootFs &fs, const std::string &path) {
    std::string real;
    int e = fs.resolve(path, real);
    return e == RootFs::kEscapesRoot || (e == 0 && fs.exists(path));
}

struct Planner {
    const Config &cfg;
    const RootFs &fs;
    Plan plan;
    CoreSpreader spreader;
    std::vector<std::pair<unsigned, std::string>> interrupts;
    bool interrupts_read = false;

    void note(const std::string &iface, const std::string &msg) { plan.notes.push_back(iface + ": " + msg); }

    const std::vector<std::pair<unsigned, std::string>> &proc_interrupts() {
        if (!interrupts_read) {
            std::string text;
            if (int e = fs.read_file("/proc/interrupts", text))
                plan.notes.push_back("cannot read /proc/interrupts: " + RootFs::describe(e));
            else interrupts = parse_proc_interrupts(text);
            interrupts_read = true;
        }
        return interrupts;
    }

    CpuSet online_cpus() {
        std::string text, err;
        CpuSet s;
        if (fs.read_file("/sys/devices/system/cpu/online", text) == 0) CpuSet::parse_list(text, s, err);
        return s;
    }

    void plan_nic(const std::string &name, const InterfaceSettings &s) {
        const std::string net = "/sys/class/net/" + name;
        if (!fs.is_dir(net)) {
            note(name, "not present; skipped (it may come back on a later pass)");
            return;
        }
        NicPlan nic;
        nic.name = name;
        nic.dcqcn_profile = s.dcqcn_profile;
        std::string text, err;
        if (fs.read_file(net + "/device/numa_node", text) == 0) {
            // -1 means the firmware did not say, not node 0.
            try {
                nic.numa_node = std::stoi(text);
            } catch (...) {
                nic.numa_node = -1;
            }
        }
        if (s.cpus) {
            nic.local_cpus = *s.cpus;
        } else if (fs.read_file(net + "/device/local_cpulist", text) == 0 &&
                   CpuSet::parse_list(text, nic.local_cpus, err) && !nic.local_cpus.empty()) {
        } else {
            nic.local_cpus = online_cpus();
            note(name, "no usable device/local_cpulist; using all online CPUs " + nic.local_cpus.to_list());
        }
        nic.irq_cpus = nic.local_cpus.minus(cfg.reserved_cpus);

        if (s.irq_affinity) plan_irqs(nic);
        plan_queues(nic, s);
        if (s.ecn) plan_ecn(nic, s);
        plan.nics.push_back(std::move(nic));
    }

    void plan_irqs(NicPlan &nic) {
        const std::string dev = "/sys/class/net/" + nic.name + "/device";
        std::vector<std::string> names;
        if (int e = fs.list_dir(dev + "/msi_irqs", names)) {
            note(nic.name, "no MSI IRQs listed in device/msi_irqs (" + RootFs::describe(e) + "); IRQ affinity skipped");
            return;
        }
        std::set<unsigned> msi;
        for (const std::string &n : names) {
            unsigned irq;
            if (parse_uint(n, irq)) msi.insert(irq);
        }
        std::vector<std::pair<unsigned, std::string>> queue_irqs;
        for (const auto &[irq, action] : proc_interrupts())
            if (msi.count(irq) && is_queue_irq(action)) queue_irqs.push_back({irq, action});
        nic.queue_irqs = queue_irqs.size();
        if (queue_irqs.empty()) {
            note(nic.name, "none of its MSI IRQs is a queue IRQ in /proc/interrupts; IRQ affinity skipped");
            return;
        }
        if (nic.irq_cpus.empty()) {
            note(nic.name, "every local CPU (" + nic.local_cpus.to_list() +
                               ") is reserved; IRQ affinity and RPS skipped");
            return;
        }
        size_t cursor = 0;
        for (const auto &[irq, action] : queue_irqs) {
            const std::string path = "/proc/irq/" + std::to_string(irq) + "/smp_affinity_list";
            if (!plannable(fs, path)) {
                note(nic.name, "irq " + std::to_string(irq) + " has no " + path + "; skipped");
                continue;
            }
            unsigned core = spreader.pick(nic.irq_cpus, cursor);
            plan.writes.push_back({nic.name, path, std::to_string(core), ValueKind::cpulist,
                                   "irq " + std::to_string(irq) + " " + action});
            plan.managed_irqs.push_back(irq);
        }
    }

    void plan_queues(NicPlan &nic, const InterfaceSettings &s) {
        const std::string q = "/sys/class/net/" + nic.name + "/queues";
        auto tx = queue_indices(fs, q, "tx-");
        auto rx = queue_indices(fs, q, "rx-");
        nic.tx_queues = tx.size();
        nic.rx_queues = rx.size();
        if (s.xps && !tx.empty() && !nic.local_cpus.empty()) {
            // XPS names the CPUs whose sends use a queue; nothing runs there, so the
            // reserved (training) cores are included: they are the ones that send.
            const auto &c = nic.local_cpus.cpus();
            for (size_t i = 0; i < tx.size(); ++i) {
                CpuSet m;
                if (tx.size() >= c.size()) m.add(c[i % c.size()]);
                else
                    for (size_t j = i; j < c.size(); j += tx.size()) m.add(c[j]);
                const std::string path = q + "/tx-" + std::to_string(tx[i]) + "/xps_cpus";
                if (plannable(fs, path))
                    plan.writes.push_back({nic.name, path, m.to_mask(), ValueKind::cpumask,
                                           "xps tx-" + std::to_string(tx[i]) + " cpus " + m.to_list()});
            }
        }
        if (s.rps && !rx.empty()) {
            // RPS does the receive work on the named CPUs, so it stays off reserved cores.
            if (nic.irq_cpus.empty()) return;
            for (unsigned i : rx) {
                const std::string path = q + "/rx-" + std::to_string(i) + "/rps_cpus";
                if (plannable(fs, path))
                    plan.writes.push_back({nic.name, path, nic.irq_cpus.to_mask(), ValueKind::cpumask,
                                           "rps rx-" + std::to_string(i) + " cpus " + nic.irq_cpus.to_list()});
            }
        }
    }

    void plan_ecn(NicPlan &nic, const InterfaceSettings &s) {
        const std::string ecn = "/sys/class/net/" + nic.name + "/ecn";
        if (!fs.is_dir(ecn + "/roce_np") || !fs.is_dir(ecn + "/roce_rp")) {
            note(nic.name, "no ecn/roce_np and ecn/roce_rp (not an mlx5 netdev with MLNX_OFED); ECN and DCQCN skipped");
            return;
        }
        nic.ecn_knobs = true;
        for (std::string_view side : {"roce_np", "roce_rp"}) {
            for (unsigned prio : s.ecn_priorities.cpus()) {
                const std::string path = ecn + "/" + std::string(side) + "/enable/" + std::to_string(prio);
                if (!plannable(fs, path)) {
                    note(nic.name, "no " + path + "; ECN for priority " + std::to_string(prio) + " not enabled there");
                    continue;
                }
                plan.writes.push_back({nic.name, path, "1", ValueKind::integer,
                                       "ecn " + std::string(side) + " enable prio " + std::to_string(prio)});
            }
        }
        for (const KnobInfo &k : knob_table()) {
            const auto &v = s.knobs[static_cast<size_t>(k.knob)];
            if (!v) continue;
            const std::string path = ecn + "/" + std::string(k.dir) + "/" + std::string(k.name);
            if (!plannable(fs, path)) {
                note(nic.name, "knob " + std::string(k.name) + " not exposed; skipped");
                continue;
            }
            plan.writes.push_back({nic.name, path, std::to_string(*v), ValueKind::integer,
                                   "dcqcn " + std::string(k.name) + " (" + std::string(k.unit) + ")"});
        }
    }

    std::vector<std::string> rdma_netdevs() {
        std::vector<std::string> names, out;
        fs.list_dir("/sys/class/net", names);
        for (const std::string &n : names)
            if (valid_ifname(n) && fs.is_dir("/sys/class/net/" + n + "/device/infiniband")) out.push_back(n);
        return out;
    }
};

} // namespace

std::vector<std::pair<unsigned, std::string>> parse_proc_interrupts(std::string_view text) {
    std::vector<std::pair<unsigned, std::string>> out;
    while (!text.empty()) {
        size_t nl = text.find('\n');
        std::string_view line = trim(text.substr(0, nl));
        text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
        size_t colon = line.find(':');
        unsigned irq;
        if (colon == std::string_view::npos || !parse_uint(line.substr(0, colon), irq)) continue;
        std::string_view rest = trim(line.substr(colon + 1));
        size_t sp = rest.find_last_of(" \t");
        std::string_view name = sp == std::string_view::npos ? rest : rest.substr(sp + 1);
        out.emplace_back(irq, std::string(name));
    }
    return out;
}

Plan make_plan(const Config &config, const RootFs &fs) {
    Planner p{config, fs, {}, {}, {}, false};
    std::set<std::string> done;
    for (const InterfaceConfig &ic : config.interfaces) {
        done.insert(ic.name);
        p.plan_nic(ic.name, ic.settings);
    }
    if (config.discover == Discover::rdma)
        for (const std::string &n : p.rdma_netdevs())
            if (done.insert(n).second) p.plan_nic(n, config.defaults);
    if (p.plan.nics.empty()) p.plan.notes.push_back("no interface to tune");
    return std::move(p.plan);
}

} // namespace ibex::tuning
