#include "runtime/bootstrap/socket.h"

#include <arpa/inet.h>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>

#include "runtime/base/status.h"

namespace ibex::bootstrap {
namespace {

void note(SocketFailure *why, const char *call, int error) {
    if (why) *why = SocketFailure{call, error, false, false};
}

void note_timeout(SocketFailure *why) {
    if (why) *why = SocketFailure{"", 0, true, false};
}

void note_closed(SocketFailure *why) {
    if (why) *why = SocketFailure{"", 0, false, true};
}

// False when the deadline passes first or poll fails (*why says which).
bool wait_fd(int fd, short events, Deadline deadline, SocketFailure *why) {
    for (;;) {
        const int left = ms_left(deadline);
        if (left <= 0) {
            note_timeout(why);
            return false;
        }
        pollfd p{fd, events, 0};
        const int r = ::poll(&p, 1, left);
        if (r > 0) return true;
        if (r < 0 && errno != EINTR) {
            note(why, "poll", errno);
            return false;
        }
    }
}

void tune(int fd) {
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

} // namespace

Deadline deadline_after_ms(int ms) { return Clock::now() + std::chrono::milliseconds(ms); }

int ms_left(Deadline d, int cap_ms) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(d - Clock::now()).count();
    if (left <= 0) return 0;
    return left > cap_ms ? cap_ms : static_cast<int>(left);
}

ibex_status_t parse_host_port(const char *text, std::string *host, uint16_t *port, bool allow_zero_port) {
    if (!text || !*text) return fail(IBEX_ERR_INVALID_ARGUMENT, "empty address (want host:port)");
    const char *colon = std::strrchr(text, ':');
    if (!colon || colon == text)
        return fail(IBEX_ERR_INVALID_ARGUMENT, "address \"%s\" is not host:port", text);
    char *end = nullptr;
    errno = 0;
    const long p = std::strtol(colon + 1, &end, 10);
    if (errno || end == colon + 1 || *end || p < 0 || p > 65535 || (p == 0 && !allow_zero_port))
        return fail(IBEX_ERR_INVALID_ARGUMENT, "address \"%s\": bad port", text);
    host->assign(text, colon);
    *port = static_cast<uint16_t>(p);
    return IBEX_OK;
}

ibex_status_t resolve_ipv4(const std::string &host, uint16_t port, sockaddr_in *out, SocketFailure *why) {
    std::memset(out, 0, sizeof *out);
    out->sin_family = AF_INET;
    out->sin_port = htons(port);
    if (::inet_pton(AF_INET, host.c_str(), &out->sin_addr) == 1) return IBEX_OK;
    addrinfo hints{};
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo *res = nullptr;
    const int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &res);
    if (rc != 0 || !res) {
        note(why, "getaddrinfo", rc);
        return fail(IBEX_ERR_INVALID_ARGUMENT, "cannot resolve \"%s\": %s", host.c_str(), gai_strerror(rc));
    }
    out->sin_addr = reinterpret_cast<sockaddr_in *>(res->ai_addr)->sin_addr;
    ::freeaddrinfo(res);
    return IBEX_OK;
}

std::string addr_string(const sockaddr_in &addr) {
    char ip[INET_ADDRSTRLEN] = "?";
    ::inet_ntop(AF_INET, &addr.sin_addr, ip, sizeof ip);
    return std::string(ip) + ":" + std::to_string(ntohs(addr.sin_port));
}

ibex_status_t listen_tcp(const sockaddr_in &addr, int *fd, uint16_t *bound_port, int backlog, SocketFailure *why) {
    const int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0) {
        const int e = errno;
        note(why, "socket", e);
        return fail_errno(IBEX_ERR_SYSTEM, e, "bootstrap: socket");
    }
    int one = 1;
    ::setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(s, reinterpret_cast<const sockaddr *>(&addr), sizeof addr) != 0) {
        const int e = errno;
        ::close(s);
        note(why, "bind", e);
        return fail_errno(e == EADDRINUSE ? IBEX_ERR_ADDRESS_IN_USE : IBEX_ERR_SYSTEM, e,
                          "bootstrap: bind %s", addr_string(addr).c_str());
    }
    if (::listen(s, backlog) != 0) {
        const int e = errno;
        ::close(s);
        note(why, "listen", e);
        return fail_errno(IBEX_ERR_SYSTEM, e, "bootstrap: listen");
    }
    sockaddr_in got{};
    socklen_t len = sizeof got;
    ::getsockname(s, reinterpret_cast<sockaddr *>(&got), &len);
    *bound_port = ntohs(got.sin_port);
    *fd = s;
    return IBEX_OK;
}

ibex_status_t connect_tcp(const sockaddr_in &addr, Deadline deadline, int *fd, const ConnectRetry &retry,
                          SocketFailure *why) {
    SocketFailure last;
    for (;;) {
        const int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (s < 0) {
            const int e = errno;
            note(why, "socket", e);
            return fail_errno(IBEX_ERR_SYSTEM, e, "bootstrap: socket");
        }
        SocketFailure attempt{"connect", 0, false, false};
        bool connected = ::connect(s, reinterpret_cast<const sockaddr *>(&addr), sizeof addr) == 0;
        if (!connected && errno != EINPROGRESS) {
            attempt.error = errno;
        } else if (!connected && wait_fd(s, POLLOUT, deadline, &attempt)) {
            int err = 0;
            socklen_t len = sizeof err;
            ::getsockopt(s, SOL_SOCKET, SO_ERROR, &err, &len);
            attempt.error = err;
            connected = err == 0;
        }
        if (connected) {
            ::fcntl(s, F_SETFL, ::fcntl(s, F_GETFL) & ~O_NONBLOCK);
            tune(s);
            *fd = s;
            return IBEX_OK;
        }
        last = attempt;
        ::close(s);
        if (ms_left(deadline) <= 0) break;
        if (retry.refused_only && (attempt.timed_out || attempt.error != ECONNREFUSED)) break;
        // Refused: rank 0 has not started listening yet. Unless told otherwise, anything
        // else is retried too, since the launcher may start ranks before the network is up.
        std::this_thread::sleep_for(std::chrono::milliseconds(std::min(retry.pause_ms, ms_left(deadline))));
        // An attempt begun at the deadline could only time out and hide the real cause.
        if (ms_left(deadline) <= 0) break;
    }
    if (why) *why = last;
    return fail_errno(IBEX_ERR_TIMEOUT, last.timed_out ? ETIMEDOUT : last.error, "bootstrap: cannot reach rank 0 at %s",
                      addr_string(addr).c_str());
}

ibex_status_t accept_tcp(int listen_fd, Deadline deadline, int *fd, SocketFailure *why) {
    if (!wait_fd(listen_fd, POLLIN, deadline, why)) return fail(IBEX_ERR_TIMEOUT, "bootstrap: no connection in time");
    int s;
    do {
        s = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
    } while (s < 0 && errno == EINTR);
    if (s < 0) {
        const int e = errno;
        note(why, "accept", e);
        return fail_errno(IBEX_ERR_SYSTEM, e, "bootstrap: accept");
    }
    tune(s);
    *fd = s;
    return IBEX_OK;
}

namespace {

// Moves len bytes with io(fd, p, n) (non-blocking), waiting for `events` in between.
// call names io in *why.
template <typename Byte, typename Io>
bool io_all(int fd, Byte *p, size_t len, short events, Deadline deadline, const char *call, SocketFailure *why, Io io) {
    while (len) {
        const ssize_t n = io(fd, p, len);
        if (n > 0) {
            p += n;
            len -= static_cast<size_t>(n);
            continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
            if (!wait_fd(fd, events, deadline, why)) return false;
            continue;
        }
        if (n == 0)
            note_closed(why);
        else
            note(why, call, errno);
        return false;
    }
    return true;
}

} // namespace

bool send_all(int fd, const void *data, size_t len, Deadline deadline, SocketFailure *why) {
    return io_all(fd, static_cast<const uint8_t *>(data), len, POLLOUT, deadline, "send", why,
                  [](int f, const uint8_t *p, size_t n) { return ::send(f, p, n, MSG_NOSIGNAL | MSG_DONTWAIT); });
}

bool recv_all(int fd, void *data, size_t len, Deadline deadline, SocketFailure *why) {
    return io_all(fd, static_cast<uint8_t *>(data), len, POLLIN, deadline, "recv", why,
                  [](int f, uint8_t *p, size_t n) { return ::recv(f, p, n, MSG_DONTWAIT); });
}

ssize_t recv_available(int fd, void *data, size_t len, SocketFailure *why) {
    const ssize_t n = ::recv(fd, data, len, MSG_DONTWAIT);
    if (n > 0) return n;
    if (n == 0 && len > 0) {
        note_closed(why);
        return -1;
    }
    if (n == 0 || errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return 0;
    note(why, "recv", errno);
    return -1;
}

} // namespace ibex::bootstrap
