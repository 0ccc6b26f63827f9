#include "tools/ibexd/daemon.h"

#include "tools/ibexd/irqbalance.h"
#include "tools/ibexd/report.h"
#include "runtime/base/rootfs.h"
#include "tools/ibexd/sd_notify.h"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <fstream>
#include <sstream>
#include <poll.h>

namespace ibex::tuning {
namespace {

volatile sig_atomic_t g_hup = 0;
volatile sig_atomic_t g_term = 0;
sigset_t g_sleep_mask; // the mask to sleep with: the original, with our signals open

void on_signal(int sig) {
    if (sig == SIGHUP) g_hup = 1;
    else g_term = 1;
}

} // namespace

void install_signal_handlers() {
    sigset_t block, old;
    sigemptyset(&block);
    for (int s : {SIGHUP, SIGTERM, SIGINT}) sigaddset(&block, s);
    sigprocmask(SIG_BLOCK, &block, &old);
    g_sleep_mask = old;
    for (int s : {SIGHUP, SIGTERM, SIGINT}) {
        sigdelset(&g_sleep_mask, s);
        struct sigaction sa {};
        sa.sa_handler = on_signal;
        sigemptyset(&sa.sa_mask);
        sigaction(s, &sa, nullptr);
    }
}

Daemon::Daemon(RootFs &fs, DaemonOptions options) : fs_(fs), options_(std::move(options)) {}
Daemon::~Daemon() = default;

bool Daemon::load(std::vector<std::string> &errors) {
    Config cfg;
    if (!load_config(options_.config_path, fs_, cfg, errors)) return false;
    config_ = std::move(cfg);
    // The state file is fixed for the process: moving it on reload would orphan the
    // originals recorded so far.
    state_path_ = options_.state_path.empty() ? config_.state_file : options_.state_path;
    applier_ = std::make_unique<Applier>(fs_, state_path_);
    std::string err;
    if (!applier_->load_state(err)) {
        errors.push_back(err);
        return false;
    }
    return true;
}

bool Daemon::load_for_restore(std::vector<std::string> &warnings, std::string &error) {
    Config cfg;
    if (!load_config(options_.config_path, fs_, cfg, warnings)) {
        // Bad values keep their defaults; the paths are what restore needs.
        std::ifstream f(options_.config_path);
        std::stringstream ss;
        ss << f.rdbuf();
        std::vector<std::string> ignored;
        cfg = Config{};
        parse_config(ss.str(), options_.config_path, cfg, ignored);
    }
    config_ = std::move(cfg);
    state_path_ = options_.state_path.empty() ? config_.state_file : options_.state_path;
    applier_ = std::make_unique<Applier>(fs_, state_path_);
    return applier_->load_state(error);
}

bool Daemon::reload(std::vector<std::string> &errors) {
    Config cfg;
    if (!load_config(options_.config_path, fs_, cfg, errors)) return false;
    if (cfg.state_file != config_.state_file && options_.state_path.empty())
        errors.push_back("state_file changed to " + cfg.state_file + "; it takes effect on restart (still using " +
                         state_path_ + ")");
    config_ = std::move(cfg);
    applier_->forget_failures();
    return true;
}

PassReport Daemon::run_pass(bool dry_run) {
    PassReport rep;
    rep.plan = make_plan(config_, fs_);
    std::vector<int> pids = find_irqbalance(fs_);
    const bool manages_irqs = !rep.plan.managed_irqs.empty();
    if (!pids.empty() && manages_irqs && config_.irqbalance == IrqbalancePolicy::refuse) {
        rep.refused = true;
        rep.result.errors.push_back(irqbalance_refusal(pids, config_.source));
        return rep;
    }
    if (manages_irqs && config_.irqbalance == IrqbalancePolicy::ban) {
        const std::string &file = config_.irqbalance_ban_file;
        std::string want = irqbalance_ban_content(rep.plan.managed_irqs, config_.reserved_cpus, file);
        std::string have;
        fs_.read_file(file, have);
        have += '\n';
        if (have != want) {
            if (dry_run) {
                rep.plan.notes.push_back("would write the irqbalance ban list to " + file);
            } else if (int e = fs_.replace_file(file, want)) {
                rep.result.errors.push_back("cannot write irqbalance ban file " + file + ": " + RootFs::describe(e));
            } else {
                rep.plan.notes.push_back("wrote the irqbalance ban list (" + std::to_string(rep.plan.managed_irqs.size()) +
                                         " IRQs) to " + file);
            }
            if (!pids.empty())
                rep.plan.notes.push_back("irqbalance is running (pid " + std::to_string(pids.front()) +
                                         "): include " + file + " in irqbalance.service and restart it");
        }
    }
    PassResult r = dry_run ? applier_->preview(rep.plan) : applier_->apply(rep.plan);
    r.errors.insert(r.errors.begin(), rep.result.errors.begin(), rep.result.errors.end());
    rep.result = std::move(r);
    return rep;
}

PassResult Daemon::restore() {
    PassResult r = applier_->restore();
    // The ban list names IRQs ibexd no longer manages.
    if (int e = fs_.remove_file(config_.irqbalance_ban_file))
        r.errors.push_back("cannot remove " + config_.irqbalance_ban_file + ": " + RootFs::describe(e));
    return r;
}

int Daemon::run(const Notifier &notifier, std::FILE *out) {
    auto pass = [&](bool first) -> bool {
        PassReport rep = run_pass(false);
        bool quiet = !first && rep.result.count(Action::changed) == 0 && rep.result.errors.empty() &&
                     rep.result.count(Action::retry) == 0 && rep.result.count(Action::failed) == 0;
        if (!quiet) {
            std::fputs(format_report(rep.plan, rep.result, options_.verbose).c_str(), out);
            std::fprintf(out, "ibexd: pass: %s\n", format_summary(rep.result).c_str());
            std::fflush(out);
        }
        return !rep.refused;
    };

    if (!pass(true)) return kExitError;
    notifier.ready("tuning " + std::to_string(config_.interfaces.size()) + " configured interface(s), every " +
                   std::to_string(interval_s()) + " s");

    const uint64_t wd = notifier.watchdog_interval_usec();
    uint64_t now = Notifier::monotonic_usec();
    uint64_t next_pass = now + interval_s() * 1000000ull;
    uint64_t next_wd = wd ? now : UINT64_MAX;
    for (;;) {
        if (g_term) {
            notifier.stopping();
            return kExitOk;
        }
        if (g_hup) {
            g_hup = 0;
            notifier.reloading();
            std::vector<std::string> errors;
            bool ok = reload(errors);
            for (const std::string &e : errors) std::fprintf(out, "ibexd: reload: %s\n", e.c_str());
            std::fprintf(out, "ibexd: reload: %s\n", ok ? "new config in effect" : "kept the previous config");
            if (!pass(true)) return kExitError;
            notifier.ready(ok ? "reloaded" : "reload rejected; previous config kept");
            next_pass = Notifier::monotonic_usec() + interval_s() * 1000000ull;
        }
        now = Notifier::monotonic_usec();
        if (now >= next_pass) {
            if (!pass(false)) return kExitError;
            next_pass = Notifier::monotonic_usec() + interval_s() * 1000000ull;
        }
        now = Notifier::monotonic_usec();
        if (now >= next_wd) {
            notifier.watchdog();
            next_wd = now + wd;
        }
        uint64_t wake = std::min(next_pass, next_wd);
        uint64_t wait = wake > now ? wake - now : 0;
        timespec ts{static_cast<time_t>(wait / 1000000), static_cast<long>(wait % 1000000) * 1000};
        // Signals are blocked except inside ppoll, so a SIGHUP arriving between the flag
        // check above and this sleep still wakes it.
        if (ppoll(nullptr, 0, &ts, &g_sleep_mask) < 0 && errno != EINTR) return kExitError;
    }
}

} // namespace ibex::tuning
