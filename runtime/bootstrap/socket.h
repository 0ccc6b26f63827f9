// TCP helpers for the bootstrap and the perftest-style tools' out-of-band channel:
// "host:port" parsing, IPv4 resolution, listen/connect/accept, and whole-buffer I/O bounded
// by a deadline (a dead or silent peer never blocks forever unless asked to).
//
// Failures are recorded as ibex errors (ibex_last_error) in the bootstrap's words; a caller
// that words its own messages passes a SocketFailure and reads what failed from it.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <netinet/in.h>
#include <string>
#include <sys/types.h>

#include <ibex/ibex.h>

namespace ibex::bootstrap {

using Clock = std::chrono::steady_clock;
using Deadline = Clock::time_point;

// A deadline that never passes: wait without limit.
inline constexpr Deadline kNoDeadline = Deadline::max();

Deadline deadline_after_ms(int ms);
// Milliseconds left (0 once passed), capped at cap_ms.
int ms_left(Deadline d, int cap_ms = 1 << 30);

// Why a helper failed: exactly one of timed_out, closed, or the call that failed and its
// error (errno; getaddrinfo's EAI_* code when call is "getaddrinfo").
struct SocketFailure {
    const char *call = "";
    int error = 0;
    bool timed_out = false; // the deadline passed first
    bool closed = false;    // the peer closed the connection
};

// "host:port" (host: IPv4 literal or a name); port 0 allowed when allow_zero_port.
ibex_status_t parse_host_port(const char *text, std::string *host, uint16_t *port, bool allow_zero_port);
ibex_status_t resolve_ipv4(const std::string &host, uint16_t port, sockaddr_in *out, SocketFailure *why = nullptr);

inline constexpr int kListenBacklog = 256;

// Listens on addr (port 0: ephemeral). *bound_port receives the port actually bound.
ibex_status_t listen_tcp(const sockaddr_in &addr, int *fd, uint16_t *bound_port, int backlog = kListenBacklog,
                         SocketFailure *why = nullptr);

// Which failed connection attempts connect_tcp tries again, and how soon.
struct ConnectRetry {
    bool refused_only = false; // true: only "refused" (nobody listens yet); anything else is final
    int pause_ms = 20;
};
// Connects, retrying failed attempts until the deadline (rank 0 may start last). The
// connection is blocking, with TCP_NODELAY.
ibex_status_t connect_tcp(const sockaddr_in &addr, Deadline deadline, int *fd, const ConnectRetry &retry = {},
                          SocketFailure *why = nullptr);
// Accepts one connection (with TCP_NODELAY) or times out.
ibex_status_t accept_tcp(int listen_fd, Deadline deadline, int *fd, SocketFailure *why = nullptr);

// Both return false on timeout, EOF or error.
bool send_all(int fd, const void *data, size_t len, Deadline deadline, SocketFailure *why = nullptr);
bool recv_all(int fd, void *data, size_t len, Deadline deadline, SocketFailure *why = nullptr);
// Reads what has arrived, up to len bytes, without waiting: the count (0 when nothing
// waits), or -1 when the peer closed or the read failed.
ssize_t recv_available(int fd, void *data, size_t len, SocketFailure *why = nullptr);

std::string addr_string(const sockaddr_in &addr);

} // namespace ibex::bootstrap
