// ibex_switch's port wiring: which port of the soft transport (transport/soft/port.h)
// stands for which endpoint. A udp port is the soft transport's udp port bound to the
// switch's address; memif ports are the dpdk memif fabric
// (transport/soft/dpdk/memif_fabric.h), opened by the caller with open_memif_fabric().
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "transport/soft/dpdk/memif_fabric.h"
#include "transport/soft/port.h"

namespace ibex::sw {

// A switch port as a UDP socket bound to `local` (port 0: any free port); it receives what
// endpoints address to it and sends with each packet's TOS (so CE marks reach the receiver
// in the IP header, as on a wire). nullptr with `err` set on failure.
std::unique_ptr<soft::Port> open_udp_switch_port(const soft::NetAddr &local, std::string &err);

// "SOCKET=IP[,SOCKET=IP...]" (--memif). False with `err` set on a bad list.
bool parse_memif_ports(const std::string &text, std::vector<soft::MemifFabricPort> &out, std::string &err);

bool parse_addr(const std::string &text, soft::NetAddr &out); // "127.0.0.2:4791" (port 4791 if none)
std::string format_addr(const soft::NetAddr &a);

} // namespace ibex::sw
