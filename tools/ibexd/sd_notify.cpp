#include "tools/ibexd/sd_notify.h"

#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

namespace ibex::tuning {

Notifier::Notifier(std::string socket_path, uint64_t watchdog_usec)
    : socket_(std::move(socket_path)), watchdog_usec_(watchdog_usec) {}

Notifier Notifier::from_env() {
    const char *sock = std::getenv("NOTIFY_SOCKET");
    uint64_t wd = 0;
    if (const char *w = std::getenv("WATCHDOG_USEC")) {
        char *end = nullptr;
        unsigned long long v = std::strtoull(w, &end, 10);
        if (end != w && *end == '\0') wd = v;
        if (const char *pid = std::getenv("WATCHDOG_PID"))
            if (std::strtol(pid, nullptr, 10) != ::getpid()) wd = 0;
    }
    if (!sock || (sock[0] != '/' && sock[0] != '@')) return Notifier(std::string(), wd);
    return Notifier(sock, wd);
}

uint64_t Notifier::monotonic_usec() {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1000000u + static_cast<uint64_t>(ts.tv_nsec) / 1000u;
}

int Notifier::send(std::string_view message) const {
    if (!enabled()) return 0;
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (socket_.size() >= sizeof addr.sun_path) return ENAMETOOLONG;
    std::memcpy(addr.sun_path, socket_.data(), socket_.size());
    if (socket_[0] == '@') addr.sun_path[0] = '\0';
    // Abstract names are not NUL-terminated: the length is exactly the name's.
    socklen_t len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + socket_.size() + (socket_[0] == '@' ? 0 : 1));
    int fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return errno;
    int err = 0;
    if (::sendto(fd, message.data(), message.size(), MSG_NOSIGNAL, reinterpret_cast<sockaddr *>(&addr), len) < 0)
        err = errno;
    ::close(fd);
    return err;
}

int Notifier::ready(std::string_view status) const {
    std::string m = "READY=1";
    if (!status.empty()) m += "\nSTATUS=" + std::string(status);
    return send(m);
}

int Notifier::reloading() const {
    return send("RELOADING=1\nMONOTONIC_USEC=" + std::to_string(monotonic_usec()));
}

int Notifier::stopping() const { return send("STOPPING=1"); }

int Notifier::watchdog() const { return send("WATCHDOG=1"); }

} // namespace ibex::tuning
