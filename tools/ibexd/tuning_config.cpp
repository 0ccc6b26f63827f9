#include "tools/ibexd/tuning_config.h"

#include "runtime/base/rootfs.h"

#include <fstream>
#include <map>
#include <set>
#include <sstream>

namespace ibex::tuning {
namespace {

// A section's keys before merging: unset means "inherit".
struct RawSettings {
    std::optional<CpuSet> cpus;
    bool cpus_local = false; // "cpus = local" resets an inherited list
    std::optional<bool> irq_affinity, xps, rps, ecn;
    std::optional<CpuSet> ecn_priorities;
    std::optional<std::string> dcqcn_profile;
    KnobValues knobs{};
};

struct Parser {
    std::string_view source;
    std::vector<std::string> &errors;
    int line = 0;

    void error(const std::string &msg) {
        errors.push_back(std::string(source) + ":" + std::to_string(line) + ": " + msg);
    }

    bool parse_bool(std::string_view key, std::string_view v, std::optional<bool> &out) {
        if (v == "yes" || v == "on" || v == "true" || v == "1") {
            out = true;
            return true;
        }
        if (v == "no" || v == "off" || v == "false" || v == "0") {
            out = false;
            return true;
        }
        error(std::string(key) + " = '" + std::string(v) + "': expected yes or no");
        return false;
    }

    bool parse_int(std::string_view key, std::string_view v, int64_t min, int64_t max, int64_t &out) {
        int64_t x = 0;
        bool ok = !v.empty() && v.size() <= 12;
        for (char c : v) {
            if (c < '0' || c > '9') ok = false;
            else x = x * 10 + (c - '0');
        }
        if (!ok) {
            error(std::string(key) + " = '" + std::string(v) + "': not a non-negative decimal integer");
            return false;
        }
        if (x < min || x > max) {
            error(std::string(key) + " = " + std::to_string(x) + ": out of range [" + std::to_string(min) + ", " +
                  std::to_string(max) + "]");
            return false;
        }
        out = x;
        return true;
    }

    bool parse_cpus(std::string_view key, std::string_view v, CpuSet &out) {
        std::string err;
        if (!CpuSet::parse_any(v, out, err)) {
            error(std::string(key) + " = '" + std::string(v) + "': " + err);
            return false;
        }
        return true;
    }

    // Keys valid in any section. Returns false when the key is not one of them.
    bool interface_key(std::string_view key, std::string_view v, RawSettings &s) {
        if (key == "cpus") {
            if (v == "local") {
                s.cpus.reset();
                s.cpus_local = true;
                return true;
            }
            CpuSet c;
            if (parse_cpus(key, v, c)) {
                if (c.empty()) error("cpus is empty: give a CPU list or 'local'");
                s.cpus = c;
            }
            return true;
        }
        if (key == "irq_affinity") return parse_bool(key, v, s.irq_affinity), true;
        if (key == "xps") return parse_bool(key, v, s.xps), true;
        if (key == "rps") return parse_bool(key, v, s.rps), true;
        if (key == "ecn") return parse_bool(key, v, s.ecn), true;
        if (key == "ecn_priorities") {
            CpuSet p;
            std::string err;
            if (!CpuSet::parse_list(v, p, err)) error("ecn_priorities = '" + std::string(v) + "': " + err);
            else if (!p.empty() && p.cpus().back() > 7)
                error("ecn_priorities = '" + std::string(v) + "': priority " + std::to_string(p.cpus().back()) +
                      " out of range [0, 7]");
            else if (p.empty()) error("ecn_priorities is empty (set ecn = no instead)");
            else s.ecn_priorities = p;
            return true;
        }
        if (key == "dcqcn_profile") {
            KnobValues probe;
            if (!profile_values(v, probe))
                error("dcqcn_profile = '" + std::string(v) + "': unknown profile (known: " +
                      std::string(profile_names()) + ")");
            else s.dcqcn_profile = std::string(v);
            return true;
        }
        if (const KnobInfo *k = find_knob(key)) {
            int64_t x;
            if (parse_int(key, v, k->min, k->max, x)) s.knobs[static_cast<size_t>(k->knob)] = x;
            return true;
        }
        return false;
    }
};

InterfaceSettings merge(const RawSettings &global, const RawSettings *section) {
    InterfaceSettings out;
    auto pick = [&](auto member, auto &dst) {
        if (section && (section->*member)) dst = *(section->*member);
        else if (global.*member) dst = *(global.*member);
    };
    pick(&RawSettings::irq_affinity, out.irq_affinity);
    pick(&RawSettings::xps, out.xps);
    pick(&RawSettings::rps, out.rps);
    pick(&RawSettings::ecn, out.ecn);
    pick(&RawSettings::ecn_priorities, out.ecn_priorities);
    pick(&RawSettings::dcqcn_profile, out.dcqcn_profile);
    if (section && (section->cpus || section->cpus_local)) out.cpus = section->cpus;
    else out.cpus = global.cpus;
    // Explicit knobs beat presets; the section beats [global].
    profile_values(out.dcqcn_profile, out.knobs);
    for (size_t i = 0; i < kKnobCount; ++i) {
        if (global.knobs[i]) out.knobs[i] = global.knobs[i];
        if (section && section->knobs[i]) out.knobs[i] = section->knobs[i];
    }
    return out;
}

} // namespace

bool valid_ifname(std::string_view name) {
    if (name.empty() || name.size() > 15 || name == "." || name == "..") return false;
    for (char c : name)
        if (c == '/' || c == ':' || c == ' ' || c == '\t' || static_cast<unsigned char>(c) < 0x21 ||
            static_cast<unsigned char>(c) > 0x7e)
            return false;
    return true;
}

bool parse_config(std::string_view text, std::string_view source, Config &out, std::vector<std::string> &errors) {
    size_t errors_before = errors.size();
    Parser p{source, errors};
    Config cfg;
    cfg.source = std::string(source);
    RawSettings global;
    std::vector<std::pair<InterfaceConfig, RawSettings>> sections;
    RawSettings *cur = &global;
    bool in_global = true;
    std::set<std::string> seen_keys;
    std::set<std::string> seen_ifs;

    std::istringstream in{std::string(text)};
    std::string raw;
    while (std::getline(in, raw)) {
        ++p.line;
        std::string_view l = raw;
        size_t hash = l.find_first_of("#;");
        if (hash != std::string_view::npos) l = l.substr(0, hash);
        l = trim(l);
        if (l.empty()) continue;
        if (l.front() == '[') {
            if (l.back() != ']') {
                p.error("malformed section header '" + std::string(l) + "'");
                continue;
            }
            std::string_view h = trim(l.substr(1, l.size() - 2));
            seen_keys.clear();
            if (h == "global") {
                cur = &global;
                in_global = true;
                continue;
            }
            if (h.starts_with("interface") && h.size() > 9 && (h[9] == ' ' || h[9] == '\t')) {
                std::string_view name = trim(h.substr(9));
                if (!valid_ifname(name)) p.error("invalid interface name '" + std::string(name) + "'");
                else if (!seen_ifs.insert(std::string(name)).second)
                    p.error("interface '" + std::string(name) + "' configured twice");
                sections.push_back({InterfaceConfig{std::string(name), p.line, {}}, RawSettings{}});
                cur = &sections.back().second;
                in_global = false;
                continue;
            }
            p.error("unknown section [" + std::string(h) + "] (expected [global] or [interface NAME])");
            cur = &global; // keep parsing to report more, into a section that is then discarded
            continue;
        }
        size_t eq = l.find('=');
        if (eq == std::string_view::npos) {
            p.error("expected 'key = value', got '" + std::string(l) + "'");
            continue;
        }
        std::string_view key = trim(l.substr(0, eq));
        std::string_view v = trim(l.substr(eq + 1));
        if (!seen_keys.insert(std::string(key)).second) {
            p.error("key '" + std::string(key) + "' set twice in this section");
            continue;
        }
        if (p.interface_key(key, v, *cur)) continue;
        if (!in_global) {
            p.error("unknown key '" + std::string(key) + "' in an [interface] section");
            continue;
        }
        if (key == "reserved_cpus") {
            p.parse_cpus(key, v, cfg.reserved_cpus);
        } else if (key == "irqbalance") {
            if (v == "ban") cfg.irqbalance = IrqbalancePolicy::ban;
            else if (v == "refuse") cfg.irqbalance = IrqbalancePolicy::refuse;
            else p.error("irqbalance = '" + std::string(v) + "': expected ban or refuse");
        } else if (key == "irqbalance_ban_file" || key == "state_file") {
            if (v.empty() || v.front() != '/' || v.find("/../") != std::string_view::npos || v.ends_with("/..") ||
                v.ends_with('/'))
                p.error(std::string(key) + " = '" + std::string(v) + "': expected an absolute file path without '..'");
            else (key == "state_file" ? cfg.state_file : cfg.irqbalance_ban_file) = std::string(v);
        } else if (key == "discover") {
            if (v == "rdma") cfg.discover = Discover::rdma;
            else if (v == "none") cfg.discover = Discover::none;
            else p.error("discover = '" + std::string(v) + "': expected rdma or none");
        } else if (key == "interval") {
            int64_t x;
            if (p.parse_int(key, v, 1, 86400, x)) cfg.interval_s = static_cast<unsigned>(x);
        } else {
            p.error("unknown key '" + std::string(key) + "'");
        }
    }

    cfg.defaults = merge(global, nullptr);
    for (auto &[ic, raw_s] : sections) {
        ic.settings = merge(global, &raw_s);
        cfg.interfaces.push_back(std::move(ic));
    }
    out = std::move(cfg);
    return errors.size() == errors_before;
}

bool validate_config(const Config &config, const RootFs &fs, std::vector<std::string> &errors) {
    size_t before = errors.size();
    for (const InterfaceConfig &ic : config.interfaces) {
        if (!fs.is_dir("/sys/class/net/" + ic.name))
            errors.push_back(config.source + ":" + std::to_string(ic.line) + ": interface '" + ic.name +
                             "' does not exist (no /sys/class/net/" + ic.name + (fs.root() == "/" ? "" : " under " + fs.root()) + ")");
    }
    if (config.interfaces.empty() && config.discover == Discover::none)
        errors.push_back(config.source + ": nothing to tune: no [interface] sections and discover = none");
    return errors.size() == before;
}

bool load_config(const std::string &path, const RootFs &fs, Config &out, std::vector<std::string> &errors) {
    std::ifstream f(path);
    if (!f) {
        errors.push_back(path + ": cannot open the config file");
        return false;
    }
    std::stringstream ss;
    ss << f.rdbuf();
    Config cfg;
    bool parsed = parse_config(ss.str(), path, cfg, errors);
    // Validate even a config that failed to parse, so every problem is reported at once.
    bool valid = validate_config(cfg, fs, errors);
    if (!parsed || !valid) return false;
    out = std::move(cfg);
    return true;
}

} // namespace ibex::tuning
