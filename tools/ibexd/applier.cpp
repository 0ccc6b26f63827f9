#include "tools/ibexd/applier.h"

#include "runtime/base/rootfs.h"

#include <cerrno>

namespace ibex::tuning {

std::string_view action_name(Action a) {
    switch (a) {
    case Action::unchanged: return "unchanged";
    case Action::changed: return "changed";
    case Action::would_change: return "would change";
    case Action::retry: return "refused, will retry";
    case Action::failed: return "FAILED";
    case Action::skipped: return "skipped";
    case Action::restored: return "restored";
    }
    return "?";
}

bool is_transient_write_error(int err) {
    return err == EINVAL || err == EBUSY || err == EAGAIN || err == ERANGE || err == ENOMEM;
}

size_t PassResult::count(Action a) const {
    size_t n = 0;
    for (const Outcome &o : outcomes) n += o.action == a;
    return n;
}

bool PassResult::ok() const {
    return errors.empty() && count(Action::retry) == 0 && count(Action::failed) == 0 && count(Action::skipped) == 0;
}

Applier::Applier(RootFs &fs, std::string state_path) : fs_(fs), state_(std::move(state_path)) {}

bool Applier::load_state(std::string &err) {
    state_loaded_ = state_.load(fs_, err) == 0;
    return state_loaded_;
}

bool Applier::equal(const Write &w, std::string_view current) const {
    std::string err;
    CpuSet a, b;
    switch (w.kind) {
    case ValueKind::integer: return trim(current) == trim(w.value);
    case ValueKind::cpulist:
        return CpuSet::parse_list(current, a, err) && CpuSet::parse_list(w.value, b, err) && a == b;
    case ValueKind::cpumask:
        return CpuSet::parse_mask(current, a, err) && CpuSet::parse_mask(w.value, b, err) && a == b;
    }
    return false;
}

PassResult Applier::preview(const Plan &plan) const {
    PassResult r;
    for (const Write &w : plan.writes) {
        Outcome o{w, {}, Action::would_change, 0, {}};
        if (int e = fs_.read_file(w.path, o.before)) {
            o.action = Action::skipped;
            o.err = e;
            o.detail = "cannot read current value: " + RootFs::describe(e);
        } else if (equal(w, o.before)) {
            o.action = Action::unchanged;
        }
        r.outcomes.push_back(std::move(o));
    }
    return r;
}

PassResult Applier::apply(const Plan &plan) {
    PassResult r = preview(plan);
    if (!state_loaded_) {
        std::string err;
        if (!load_state(err)) {
            r.errors.push_back(err + "; nothing written (fix or remove it)");
            for (Outcome &o : r.outcomes)
                if (o.action == Action::would_change) o.action = Action::skipped, o.detail = "state file unusable";
            return r;
        }
    }
    // Record every original first, in one save, before touching anything.
    bool state_dirty = false;
    for (Outcome &o : r.outcomes) {
        if (o.action != Action::would_change && o.action != Action::skipped) continue;
        if (given_up_.count(o.write.path)) {
            o.action = Action::skipped;
            o.detail = "gave up on it earlier; reload (SIGHUP) to try again";
            continue;
        }
        if (o.action == Action::skipped) {
            // Unreadable, so no original can be recorded and the file is not written.
            if (is_transient_write_error(o.err)) {
                o.action = Action::retry;
            } else {
                o.action = Action::failed;
                o.detail += "; not retried until reload";
                given_up_.insert(o.write.path);
            }
            continue;
        }
        if (!state_.has(o.write.path)) {
            state_.add(o.write.path, o.before);
            state_dirty = true;
        }
    }
    if (state_dirty) {
        if (int e = state_.save(fs_)) {
            r.errors.push_back("cannot save state file " + state_.path() + ": " + RootFs::describe(e) +
                               "; nothing written, since the originals could not be restored");
            for (Outcome &o : r.outcomes)
                if (o.action == Action::would_change) o.action = Action::skipped, o.detail = "state file not saved";
            std::string err;
            state_.load(fs_, err); // drop the unsaved entries
            return r;
        }
    }
    for (Outcome &o : r.outcomes) {
        if (o.action != Action::would_change) continue;
        int e = fs_.write_file(o.write.path, o.write.value);
        o.err = e;
        if (e == 0) {
            o.action = Action::changed;
        } else if (is_transient_write_error(e)) {
            o.action = Action::retry;
            o.detail = "kernel refused " + o.write.value + ": " + RootFs::describe(e);
        } else {
            o.action = Action::failed;
            o.detail = "write failed: " + RootFs::describe(e) + "; not retried until reload";
            given_up_.insert(o.write.path);
        }
    }
    return r;
}

PassResult Applier::restore() {
    PassResult r;
    std::string err;
    if (!load_state(err)) {
        r.errors.push_back(err);
        return r;
    }
    // Undo in reverse order of the first writes.
    auto entries = state_.entries();
    for (auto it = entries.rbegin(); it != entries.rend(); ++it) {
        Outcome o{Write{"", it->first, it->second, ValueKind::integer, "original"}, {}, Action::restored, 0, {}};
        fs_.read_file(it->first, o.before);
        int e = fs_.write_file(it->first, it->second);
        o.err = e;
        if (e == 0) {
            state_.erase(it->first);
        } else if (e == ENOENT) {
            // The IRQ or netdev is gone; a new one will not want this value.
            o.action = Action::skipped;
            o.detail = "file no longer exists; forgotten";
            state_.erase(it->first);
        } else {
            o.action = is_transient_write_error(e) ? Action::retry : Action::failed;
            o.detail = "restore failed: " + RootFs::describe(e) + "; kept in the state file";
        }
        r.outcomes.push_back(std::move(o));
    }
    if (int e = state_.save(fs_))
        r.errors.push_back("cannot update state file " + state_.path() + ": " + RootFs::describe(e));
    return r;
}

} // namespace ibex::tuning
