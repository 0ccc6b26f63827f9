// systemd's notify protocol without libsystemd: one datagram per state change to the
// unix socket named by $NOTIFY_SOCKET (a path, or '@' for the abstract namespace).
// Without the variable every call is a no-op, so ibexd runs the same outside systemd.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace ibex::tuning {

class Notifier {
public:
    Notifier() = default; // disabled
    Notifier(std::string socket_path, uint64_t watchdog_usec);
    // Reads NOTIFY_SOCKET, WATCHDOG_USEC and WATCHDOG_PID (a watchdog meant for another
    // process is ignored).
    static Notifier from_env();

    bool enabled() const { return !socket_.empty(); }
    // Half of WATCHDOG_USEC, as sd_watchdog_enabled() advises; 0 when there is no watchdog.
    uint64_t watchdog_interval_usec() const { return watchdog_usec_ / 2; }

    int send(std::string_view message) const; // 0 or errno
    int ready(std::string_view status = {}) const;
    int reloading() const; // RELOADING=1 with MONOTONIC_USEC, as systemd >= 253 expects
    int stopping() const;
    int watchdog() const;

    static uint64_t monotonic_usec();

private:
    std::string socket_;
    uint64_t watchdog_usec_ = 0;
};

} // namespace ibex::tuning
