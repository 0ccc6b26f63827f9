// One DPDK EAL per process, started on first use of a dpdk device. Its arguments come from
// IBEX_DPDK_ARGS, else defaults that suit a shared host: no hugepages unless some are
// reserved, no shared config files, a file prefix of our own, no PCI scan, a small memory
// budget, and the caller's CPU affinity kept (EAL would pin the thread to lcore 0).
#pragma once

#include <string>
#include <vector>

#include <ibex/ibex.h>

namespace ibex::soft::dpdk {

// Starts the EAL once per process (later calls return the first outcome). Thread safe.
// A process that has forked must call this in the child, never inherit it.
ibex_status_t ensure_eal();

// Runs fn on EAL's interrupt thread (as an alarm callback) and waits for it, bounded.
// PMDs handle link events there (memif's disconnect, for one); stopping or removing a
// port from that same thread keeps the two from running at once. False if it did not
// run within the wait (fn then may still run later and must not refer to the stack).
bool run_on_interrupt_thread(void (*fn)(void *), void *arg, int timeout_ms = 5000);

// The argument vector ensure_eal() would use (argv[0] first), for logs and tests.
std::vector<std::string> eal_arguments();

} // namespace ibex::soft::dpdk
