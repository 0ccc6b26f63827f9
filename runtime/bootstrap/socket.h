// TCP helpers for the bootstrap: "host:port" parsing, IPv4 resolution, listen/connect,
// and whole-buffer I/O bounded by a deadline (a dead or silent peer never blocks forever).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <netinet/in.h>
#include <string>

#include <ibex/ibex.h>

namespace ibex::bootstrap {

using Clock = std::chrono::steady_clock;
using Deadline = Clock::time_point;

Deadline deadline_after_ms(int ms);
// Milliseconds left (0 once passed), capped at cap_ms.
int ms_left(Deadline d, int cap_ms = 1 << 30);

// "host:port" (host: IPv4 literal or a name); port 0 allowed when allow_zero_port.
ibex_status_t parse_host_port(const char *text, std::string *host, uint16_t *port, bool allow_zero_port);
ibex_status_t resolve_ipv4(const std::string &host, uint16_t port, sockaddr_in *out);

// Listens on addr (port 0: ephemeral). *bound_port receives the port actually bound.
ibex_status_t listen_tcp(const sockaddr_in &addr, int *fd, uint16_t *bound_port);
// Connects, retrying refused/unreachable attempts until the deadline (rank 0 may start last).
ibex_status_t connect_tcp(const sockaddr_in &addr, Deadline deadline, int *fd);
// Accepts one connection or times out.
ibex_status_t accept_tcp(int listen_fd, Deadline deadline, int *fd);

// Both return false on timeout, EOF or error.
bool send_all(int fd, const void *data, size_t len, Deadline deadline);
bool recv_all(int fd, void *data, size_t len, Deadline deadline);

std::string addr_string(const sockaddr_in &addr);

} // namespace ibex::bootstrap
