// ibexd: keeps each host's NIC interrupts, XPS/RPS masks and ECN/DCQCN settings where
// they belong. Flags only; the work is in the tuning library beside it.
#include "tools/ibexd/daemon.h"
#include "tools/ibexd/report.h"
#include "runtime/base/rootfs.h"
#include "tools/ibexd/sd_notify.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

namespace {

using namespace ibex::tuning;

constexpr const char *kUsage =
    "usage: ibexd [options]\n"
    "  --config FILE    configuration file (default /etc/ibexd/ibexd.conf)\n"
    "  --root DIR       resolve every /sys and /proc path (and the state file) under DIR (default /)\n"
    "  --oneshot        tune once and exit (status 0: all applied, 3: some writes refused)\n"
    "  --dry-run        print the plan and what would change; write nothing\n"
    "  --restore        put back every original value ibexd recorded, then exit\n"
    "  --interval SEC   seconds between passes in daemon mode (default: config, 30)\n"
    "  --state FILE     original-value record (default: config, /var/lib/ibexd/state)\n"
    "  -v               list unchanged files too; info-level logging\n"
    "  -h, --help       this text\n"
    "Without --oneshot, --dry-run or --restore, ibexd runs as a daemon: a pass every\n"
    "interval, SIGHUP reloads the config, systemd notify/watchdog when $NOTIFY_SOCKET is set.\n";

int usage_error(const std::string &msg) {
    std::fprintf(stderr, "ibexd: %s\n%s", msg.c_str(), kUsage);
    return kExitUsage;
}

} // namespace

int main(int argc, char **argv) {
    DaemonOptions opt;
    opt.config_path = "/etc/ibexd/ibexd.conf";
    std::string root = "/";
    bool oneshot = false, dry_run = false, restore = false;

    for (int i = 1; i < argc; ++i) {
        std::string_view a = argv[i];
        auto value = [&](std::string &dst) -> bool {
            if (i + 1 >= argc) return false;
            dst = argv[++i];
            return true;
        };
        if (a == "-h" || a == "--help") {
            std::fputs(kUsage, stdout);
            return kExitOk;
        } else if (a == "--config") {
            if (!value(opt.config_path)) return usage_error("--config needs a file");
        } else if (a == "--root") {
            if (!value(root)) return usage_error("--root needs a directory");
        } else if (a == "--state") {
            if (!value(opt.state_path) || opt.state_path.empty() || opt.state_path[0] != '/')
                return usage_error("--state needs an absolute path (it is resolved under --root)");
        } else if (a == "--interval") {
            std::string v;
            char *end = nullptr;
            unsigned long n = value(v) ? std::strtoul(v.c_str(), &end, 10) : 0;
            if (v.empty() || *end || n < 1 || n > 86400) return usage_error("--interval needs 1..86400 seconds");
            opt.interval_s = static_cast<unsigned>(n);
        } else if (a == "--oneshot") {
            oneshot = true;
        } else if (a == "--dry-run") {
            dry_run = true;
        } else if (a == "--restore") {
            restore = true;
        } else if (a == "-v" || a == "--verbose") {
            opt.verbose = true;
        } else {
            return usage_error("unknown option '" + std::string(a) + "'");
        }
    }
    if (dry_run + restore + oneshot > 1) return usage_error("--oneshot, --dry-run and --restore exclude each other");
    if (opt.verbose) setenv("IBEX_LOG_LEVEL", "info", 0);

    ibex::RootFs fs(root);
    if (!fs.valid()) {
        std::fprintf(stderr, "ibexd: %s\n", fs.error().c_str());
        return kExitError;
    }
    Daemon daemon(fs, opt);
    std::vector<std::string> errors;
    if (restore) {
        std::string err;
        bool ok = daemon.load_for_restore(errors, err);
        for (const std::string &e : errors) std::fprintf(stderr, "ibexd: warning: %s\n", e.c_str());
        if (!ok) {
            std::fprintf(stderr, "ibexd: %s\n", err.c_str());
            return kExitError;
        }
        PassResult r = daemon.restore();
        std::fputs(format_report(Plan{}, r, true).c_str(), stdout);
        std::printf("ibexd: restore: %s\n", format_summary(r).c_str());
        return r.errors.empty() && r.count(Action::retry) == 0 && r.count(Action::failed) == 0 ? kExitOk
                                                                                                : kExitPartial;
    }
    if (!daemon.load(errors)) {
        for (const std::string &e : errors) std::fprintf(stderr, "ibexd: %s\n", e.c_str());
        std::fprintf(stderr, "ibexd: configuration rejected; nothing was changed\n");
        return kExitError;
    }

    if (dry_run || oneshot) {
        PassReport rep = daemon.run_pass(dry_run);
        if (dry_run)
            std::printf("ibexd: dry run under root %s, config %s: nothing is written\n", fs.root().c_str(),
                        opt.config_path.c_str());
        std::fputs(format_report(rep.plan, rep.result, dry_run || opt.verbose).c_str(), stdout);
        std::printf("ibexd: %s: %s\n", dry_run ? "plan" : "pass", format_summary(rep.result).c_str());
        if (rep.refused) return kExitError;
        if (dry_run) return kExitOk;
        return rep.result.ok() ? kExitOk : kExitPartial;
    }

    install_signal_handlers();
    return daemon.run(Notifier::from_env(), stdout);
}
