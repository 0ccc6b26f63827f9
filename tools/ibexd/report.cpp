#include "tools/ibexd/report.h"

#include <algorithm>
#include <cstdio>

namespace ibex::tuning {
namespace {

std::string pad(std::string s, size_t width) {
    if (s.size() < width) s.append(width - s.size(), ' ');
    return s;
}

std::string outcome_line(const Outcome &o) {
    std::string line = "  " + pad(std::string(action_name(o.action)), 14) + pad(o.write.path, 60) + " ";
    std::string before = o.before.empty() ? "?" : o.before;
    if (o.action == Action::unchanged) line += pad(o.write.value, 22);
    else line += pad(before + " -> " + o.write.value, 22);
    line += " " + o.write.what;
    if (!o.detail.empty()) line += "\n      " + o.detail;
    return line + "\n";
}

} // namespace

std::string format_summary(const PassResult &r) {
    std::string s;
    for (Action a : {Action::changed, Action::would_change, Action::restored, Action::unchanged, Action::retry,
                     Action::failed, Action::skipped}) {
        size_t n = r.count(a);
        if (n == 0 && a != Action::unchanged) continue;
        s += (s.empty() ? "" : ", ") + std::to_string(n) + " " + std::string(action_name(a));
    }
    return s;
}

std::string format_report(const Plan &plan, const PassResult &r, bool include_unchanged) {
    std::string s;
    auto print_iface = [&](const std::string &iface) {
        for (const Outcome &o : r.outcomes)
            if (o.write.iface == iface && (include_unchanged || o.action != Action::unchanged)) s += outcome_line(o);
    };
    for (const NicPlan &n : plan.nics) {
        char head[512];
        std::snprintf(head, sizeof head,
                      "%s: numa node %s, local cpus %s, irq cpus %s, %zu queue irqs, %zu tx / %zu rx queues, "
                      "ecn knobs %s, dcqcn profile %s\n",
                      n.name.c_str(), n.numa_node < 0 ? "unknown" : std::to_string(n.numa_node).c_str(),
                      n.local_cpus.to_list().c_str(), n.irq_cpus.empty() ? "none" : n.irq_cpus.to_list().c_str(),
                      n.queue_irqs, n.tx_queues, n.rx_queues, n.ecn_knobs ? "yes" : "no", n.dcqcn_profile.c_str());
        s += head;
        print_iface(n.name);
    }
    // Outcomes that belong to no planned NIC (restore).
    bool any_other = std::any_of(r.outcomes.begin(), r.outcomes.end(), [&](const Outcome &o) {
        return std::none_of(plan.nics.begin(), plan.nics.end(), [&](const NicPlan &n) { return n.name == o.write.iface; });
    });
    if (any_other) {
        for (const Outcome &o : r.outcomes)
            if (std::none_of(plan.nics.begin(), plan.nics.end(), [&](const NicPlan &n) { return n.name == o.write.iface; }) &&
                (include_unchanged || o.action != Action::unchanged))
                s += outcome_line(o);
    }
    for (const std::string &n : plan.notes) s += "note: " + n + "\n";
    for (const std::string &e : r.errors) s += "error: " + e + "\n";
    return s;
}

} // namespace ibex::tuning
