// A switch port as a UDP socket: it receives what endpoints address to it and sends with
// a per-packet TOS (so CE marks reach the receiver in the IP header, as on a wire).
#pragma once

#include <memory>
#include <string>

#include "tools/ibex_switch/port_io.h"

namespace ibex::sw {

// Binds `local` (port 0: any free port). nullptr with `err` set on failure.
std::unique_ptr<PortIo> open_udp_port_io(const Addr &local, std::string &err);

bool parse_addr(const std::string &text, Addr &out); // "127.0.0.2:4791"
std::string format_addr(const Addr &a);

} // namespace ibex::sw
