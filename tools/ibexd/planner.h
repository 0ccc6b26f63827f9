// Turns a config and what the (possibly fixture) machine shows into the list of files
// to write. Pure with respect to the machine: it only reads, so --dry-run, the applier
// and the tests all see the same plan.
#pragma once

#include "runtime/base/cpuset.h"
#include "tools/ibexd/tuning_config.h"

#include <string>
#include <vector>
#include "runtime/base/rootfs.h"

namespace ibex::tuning {


// How the current contents of a file compare to the wanted value: the kernel prints
// masks zero-padded to nr_cpu_ids and lists in its own way, so equality is semantic.
enum class ValueKind { integer, cpulist, cpumask };

struct Write {
    std::string iface;
    std::string path; // host path, resolved under the root when applied
    std::string value;
    ValueKind kind = ValueKind::integer;
    std::string what; // human description: "irq 45 (mlx5_comp0@pci:...)", "xps tx-3"
};

struct NicPlan {
    std::string name;
    int numa_node = -1;
    CpuSet local_cpus; // from device/local_cpulist (or the config override)
    CpuSet irq_cpus;   // local minus reserved: where IRQs and RPS work may run
    size_t queue_irqs = 0;
    size_t tx_queues = 0;
    size_t rx_queues = 0;
    bool ecn_knobs = false;
    std::string dcqcn_profile;
};

struct Plan {
    std::vector<NicPlan> nics;
    std::vector<Write> writes;
    std::vector<std::string> notes; // what could not be planned, and why
    std::vector<unsigned> managed_irqs;
};

Plan make_plan(const Config &config, const RootFs &fs);

// IRQ number -> action name, from /proc/interrupts (the last field of each numbered line).
std::vector<std::pair<unsigned, std::string>> parse_proc_interrupts(std::string_view text);

} // namespace ibex::tuning
