// irqbalance rewrites /proc/irq/N/smp_affinity behind ibexd's back. ibexd finds it by
// its process name and either hands the admin a file that bans ibexd's IRQs there
// (policy ban) or refuses to run (policy refuse).
#pragma once

#include "runtime/base/cpuset.h"

#include <span>
#include <string>
#include <vector>
#include "runtime/base/rootfs.h"

namespace ibex::tuning {


// PIDs whose /proc/<pid>/comm is "irqbalance", under the root.
std::vector<int> find_irqbalance(const RootFs &fs);

// An environment file for irqbalance.service (Debian's unit passes $IRQBALANCE_ARGS and
// reads IRQBALANCE_BANNED_CPULIST): --banirq for each IRQ ibexd manages, and the reserved
// cores banned so irqbalance does not move other interrupts onto training cores.
std::string irqbalance_ban_content(std::span<const unsigned> irqs, const CpuSet &reserved,
                                   const std::string &file_path);

std::string irqbalance_refusal(std::span<const int> pids, const std::string &config_source);

} // namespace ibex::tuning
