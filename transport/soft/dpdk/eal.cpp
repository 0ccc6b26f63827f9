#include "transport/soft/dpdk/eal.h"

#include <fstream>
#include <mutex>
#include <pthread.h>
#include <sched.h>
#include <sstream>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>

#include <rte_alarm.h>
#include <rte_eal.h>
#include <rte_errno.h>

#include "runtime/base/config.h"
#include "runtime/base/log.h"
#include "runtime/base/status.h"
#include "transport/soft/dpdk/memif_unmap_guard.h"

namespace ibex::soft::dpdk {
namespace {

bool hugepages_reserved() {
    std::ifstream f("/proc/sys/vm/nr_hugepages");
    long n = 0;
    return (f >> n) && n > 0;
}

std::mutex g_mu;
bool g_tried = false;
pid_t g_pid = 0;
ibex_status_t g_status = IBEX_OK;
std::string g_error;

} // namespace

std::vector<std::string> eal_arguments() {
    std::vector<std::string> args{"ibex"};
    const std::string user = config::get_string("IBEX_DPDK_ARGS", "");
    if (!user.empty()) {
        std::istringstream in(user);
        for (std::string a; in >> a;) args.push_back(a);
        return args;
    }
    // --no-huge implies legacy memory and EAL refuses it together with --in-memory;
    // --no-shconf gives the same "leave nothing behind" without that conflict.
    if (!hugepages_reserved()) args.push_back("--no-huge");
    args.insert(args.end(), {"--no-shconf", "--no-pci", "--no-telemetry", "--iova-mode=va", "-l", "0", "-m",
                             std::to_string(config::get_int("IBEX_DPDK_MEMORY_MB", 256, 64, 1 << 20)),
                             "--file-prefix=ibex" + std::to_string(getpid()),
                             std::string("--log-level=") + config::get_string("IBEX_DPDK_LOG_LEVEL", "*:warning")});
    return args;
}

ibex_status_t ensure_eal() {
    std::lock_guard l(g_mu);
    if (g_tried) {
        if (g_pid != getpid())
            return fail(IBEX_ERR_INVALID_STATE,
                        "DPDK EAL was started in the parent process (pid %d) before fork: open dpdk devices in the child only",
                        int(g_pid));
        if (g_status != IBEX_OK) return fail(g_status, "%s", g_error.c_str());
        return IBEX_OK;
    }
    g_tried = true;
    g_pid = getpid();
    std::vector<std::string> args = eal_arguments();
    std::vector<char *> argv;
    std::string joined;
    for (auto &a : args) {
        argv.push_back(a.data());
        joined += (joined.empty() ? "" : " ") + a;
    }
    argv.push_back(nullptr);
    cpu_set_t cpus;
    const bool have_cpus = pthread_getaffinity_np(pthread_self(), sizeof cpus, &cpus) == 0;
    IBEX_LOG(info, "dpdk: starting EAL: %s", joined.c_str());
    const int r = rte_eal_init(static_cast<int>(argv.size() - 1), argv.data());
    // EAL pins the calling thread to its main lcore; ranks sharing a host keep theirs.
    if (have_cpus) pthread_setaffinity_np(pthread_self(), sizeof cpus, &cpus);
    if (r < 0) {
        const int e = rte_errno;
        g_status = IBEX_ERR_SYSTEM;
        g_error = "dpdk: EAL did not start (" + joined + "): " + rte_strerror(e) +
                  " (set IBEX_DPDK_ARGS to change its arguments)";
        return fail(g_status, "%s", g_error.c_str());
    }
    install_memif_unmap_guard(); // EAL has loaded the PMD plugins
    return IBEX_OK;
}

namespace {

struct AlarmCall {
    void (*fn)(void *);
    void *arg;
    std::atomic<bool> done{false};
};

void alarm_trampoline(void *p) {
    auto *c = static_cast<AlarmCall *>(p);
    c->fn(c->arg);
    c->done.store(true, std::memory_order_release);
}

} // namespace

bool run_on_interrupt_thread(void (*fn)(void *), void *arg, int timeout_ms) {
    // Heap-held: on a timeout the callback may still come, and must find its record.
    auto *c = new AlarmCall{fn, arg};
    if (rte_eal_alarm_set(1, alarm_trampoline, c) != 0) {
        delete c;
        fn(arg);
        return true;
    }
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (!c->done.load(std::memory_order_acquire)) {
        if (std::chrono::steady_clock::now() > end) {
            IBEX_LOG(warn, "dpdk: EAL interrupt thread did not run a request within %d ms", timeout_ms);
            return false; // c leaks: the alarm may still fire
        }
        std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    delete c;
    return true;
}

} // namespace ibex::soft::dpdk
