// Carries a plan out: compares each file with the wanted value, records originals in
// the state file, writes what differs, and reports every result. A write the kernel
// refuses for a transient reason (EINVAL, EBUSY, EAGAIN, ERANGE, ENOMEM: the same set
// irqbalance treats as "try later") is retried on the next pass; any other error stops
// ibexd managing that file until a reload, so a broken attribute is reported once rather
// than every pass. Neither kind stops the other writes.
#pragma once

#include "tools/ibexd/planner.h"
#include "tools/ibexd/state_file.h"

#include <set>
#include <string>
#include <vector>
#include "runtime/base/rootfs.h"

namespace ibex::tuning {


enum class Action {
    unchanged,    // already had the wanted value
    changed,      // written
    would_change, // dry run: would be written
    retry,        // refused for now; tried again next pass
    failed,       // refused for good; not tried again until reload
    skipped,      // given up earlier, or no original could be recorded
    restored,     // --restore put the original back
};

std::string_view action_name(Action a);
bool is_transient_write_error(int err);

struct Outcome {
    Write write;
    std::string before; // current contents before the pass (empty when unreadable)
    Action action = Action::unchanged;
    int err = 0;
    std::string detail; // why, for retry/failed/skipped
};

struct PassResult {
    std::vector<Outcome> outcomes;
    std::vector<std::string> errors; // pass-level problems (state file, irqbalance, ...)
    size_t count(Action a) const;
    bool ok() const; // nothing failed, nothing waits for a retry, no pass-level error
};

class Applier {
public:
    Applier(RootFs &fs, std::string state_path);

    // Reads originals recorded by an earlier run. Must succeed before apply/restore: a
    // corrupt state file must not be silently replaced.
    bool load_state(std::string &err);
    const StateFile &state() const { return state_; }

    PassResult preview(const Plan &plan) const; // reads only
    PassResult apply(const Plan &plan);
    PassResult restore();
    void forget_failures() { given_up_.clear(); } // on reload: try everything again

private:
    bool equal(const Write &w, std::string_view current) const;

    RootFs &fs_;
    StateFile state_;
    bool state_loaded_ = false;
    std::set<std::string> given_up_;
};

} // namespace ibex::tuning
