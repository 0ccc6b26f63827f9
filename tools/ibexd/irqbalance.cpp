#include "tools/ibexd/irqbalance.h"

#include "runtime/base/rootfs.h"

#include <algorithm>

namespace ibex::tuning {

std::vector<int> find_irqbalance(const RootFs &fs) {
    std::vector<std::string> names;
    std::vector<int> pids;
    if (fs.list_dir("/proc", names) != 0) return pids;
    for (const std::string &n : names) {
        if (n.empty() || n.size() > 9 || !std::all_of(n.begin(), n.end(), [](char c) { return c >= '0' && c <= '9'; }))
            continue;
        std::string comm;
        // Processes exit while we look; an unreadable comm is simply not irqbalance.
        if (fs.read_file("/proc/" + n + "/comm", comm) == 0 && trim(comm) == "irqbalance")
            pids.push_back(std::stoi(n));
    }
    std::sort(pids.begin(), pids.end());
    return pids;
}

std::string irqbalance_ban_content(std::span<const unsigned> irqs, const CpuSet &reserved,
                                   const std::string &file_path) {
    std::vector<unsigned> sorted(irqs.begin(), irqs.end());
    std::sort(sorted.begin(), sorted.end());
    sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
    std::string s =
        "# Written by ibexd: the IRQs whose affinity ibexd manages. irqbalance must leave them alone.\n"
        "# Use it from irqbalance.service with a drop-in (systemctl edit irqbalance):\n"
        "#   [Service]\n"
        "#   EnvironmentFile=-" + file_path + "\n"
        "# then restart irqbalance. IRQ numbers change when NICs come and go; ibexd rewrites this file.\n";
    if (!reserved.empty()) s += "IRQBALANCE_BANNED_CPULIST=" + reserved.to_list() + "\n";
    s += "IRQBALANCE_ARGS=\"";
    for (size_t i = 0; i < sorted.size(); ++i) s += (i ? " --banirq=" : "--banirq=") + std::to_string(sorted[i]);
    s += "\"\n";
    return s;
}

std::string irqbalance_refusal(std::span<const int> pids, const std::string &config_source) {
    std::string p;
    for (int pid : pids) p += (p.empty() ? "" : ", ") + std::to_string(pid);
    return "irqbalance is running (pid " + p +
           ") and would overwrite the IRQ affinity ibexd sets; refusing to run (irqbalance = refuse in " +
           config_source + "). Stop it (systemctl disable --now irqbalance) or set irqbalance = ban.";
}

} // namespace ibex::tuning
