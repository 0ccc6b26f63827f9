// ibexd's configuration file: INI-like, documented in tools/ibexd/README.md.
//
//   [global]                  daemon-wide keys, and defaults for every interface
//   [interface ens1f0]        one section per netdev to tune
//   key = value               '#' or ';' starts a comment
//
// Parsing checks syntax and ranges; validation against a root checks what only the
// machine can tell (the interface exists). Both collect every problem with its line
// number, so an admin fixes the file in one go.
#pragma once

#include "runtime/base/cpuset.h"
#include "tools/ibexd/dcqcn_knobs.h"

#include <optional>
#include <string>
#include <string_view>
#include <vector>
#include "runtime/base/rootfs.h"

namespace ibex::tuning {


enum class IrqbalancePolicy { ban, refuse };
enum class Discover { none, rdma };

// What ibexd does to one netdev, after defaults, [global] and the section are merged.
struct InterfaceSettings {
    std::optional<CpuSet> cpus; // unset: the NIC's local_cpulist
    bool irq_affinity = true;
    bool xps = true;
    bool rps = false;
    bool ecn = true;
    CpuSet ecn_priorities{3};
    std::string dcqcn_profile = "none";
    KnobValues knobs{}; // preset overlaid with explicit keys; unset = leave alone
};

struct InterfaceConfig {
    std::string name;
    int line = 0;
    InterfaceSettings settings;
};

struct Config {
    std::string source; // file name, for messages
    CpuSet reserved_cpus;
    IrqbalancePolicy irqbalance = IrqbalancePolicy::ban;
    std::string irqbalance_ban_file = "/run/ibexd/irqbalance.env";
    std::string state_file = "/var/lib/ibexd/state";
    Discover discover = Discover::rdma;
    unsigned interval_s = 30;
    InterfaceSettings defaults;            // for discovered interfaces
    std::vector<InterfaceConfig> interfaces; // named sections, in file order
};

// Syntax, key names and value ranges. Returns false and fills errors ("file:line: ...");
// out is filled either way (bad values left at their defaults) so validation can run too.
bool parse_config(std::string_view text, std::string_view source, Config &out, std::vector<std::string> &errors);
// Facts about the machine: each named interface exists under the root.
bool validate_config(const Config &config, const RootFs &fs, std::vector<std::string> &errors);
// Reads the file (a host path, not under the root: it is the admin's input), parses and
// validates it.
bool load_config(const std::string &path, const RootFs &fs, Config &out, std::vector<std::string> &errors);

// Linux interface names: 1-15 characters, no '/', whitespace, ':' or a lone "." / "..".
bool valid_ifname(std::string_view name);

} // namespace ibex::tuning
