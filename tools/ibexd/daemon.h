// ibexd's lifecycle: load and validate the config, run passes (plan, irqbalance check,
// apply), reload on SIGHUP keeping the old config when the new one is bad, and the
// systemd notify/watchdog loop. Signals only set flags; all work happens in the loop.
#pragma once

#include "tools/ibexd/applier.h"
#include "tools/ibexd/planner.h"
#include "tools/ibexd/tuning_config.h"

#include <cstdio>
#include <memory>
#include <string>
#include <vector>
#include "runtime/base/rootfs.h"

namespace ibex::tuning {

class Notifier;

struct DaemonOptions {
    std::string config_path;
    std::string state_path;  // empty: the config's state_file
    unsigned interval_s = 0; // 0: the config's interval
    bool verbose = false;
};

struct PassReport {
    Plan plan;
    PassResult result;
    bool refused = false; // irqbalance = refuse and irqbalance runs: nothing was written
};

// Exit statuses of the ibexd tool.
inline constexpr int kExitOk = 0;
inline constexpr int kExitError = 1;   // bad config, irqbalance refused, unusable state file
inline constexpr int kExitUsage = 2;
inline constexpr int kExitPartial = 3; // tuned, but some writes were refused or failed

class Daemon {
public:
    Daemon(RootFs &fs, DaemonOptions options);
    ~Daemon();

    // First load: on failure errors says why and nothing may run.
    bool load(std::vector<std::string> &errors);
    // For --restore, which must work even when the config no longer validates (a NIC
    // was removed): only the state and ban file paths matter. Problems go to warnings.
    bool load_for_restore(std::vector<std::string> &warnings, std::string &error);
    // SIGHUP: parse and validate the file again; swap it in only if it is good. Failures
    // the applier gave up on are tried again with the new config.
    bool reload(std::vector<std::string> &errors);
    const Config &config() const { return config_; }
    const std::string &state_path() const { return state_path_; }
    unsigned interval_s() const { return options_.interval_s ? options_.interval_s : config_.interval_s; }

    PassReport run_pass(bool dry_run);
    PassResult restore();

    // The daemon: passes every interval, SIGHUP reload, SIGTERM/SIGINT stop, notify and
    // watchdog. Prints each pass's changes and failures to out. Returns the exit status.
    int run(const Notifier &notifier, std::FILE *out);

private:
    RootFs &fs_;
    DaemonOptions options_;
    Config config_;
    std::string state_path_;
    std::unique_ptr<Applier> applier_;
};

// Blocks SIGHUP, SIGTERM and SIGINT and installs flag-setting handlers; Daemon::run
// unblocks them only while it sleeps, so no signal is lost between check and sleep.
void install_signal_handlers();

} // namespace ibex::tuning
