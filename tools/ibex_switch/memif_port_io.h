// Switch ports as DPDK memif interfaces: port i serves memif socket i, and endpoint i
// connects to it as a client (`dpdk:memif:<socket i>,role=client,ip=<ip i>`). Unlike the
// udp ports, frames keep their IP addresses: the switch forwards each whole Ethernet
// frame to the port of its destination IP, rewriting only the Ethernet addresses and the
// IP ECN bits (and the header checksum); the ICRC masks both, so it stays valid. The
// switch answers ARP for every endpoint's address with the asking port's MAC (proxy ARP),
// so endpoints need no neighbour configuration.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tools/ibex_switch/port_io.h"

namespace ibex::sw {

struct MemifPortSpec {
    std::string socket;
    uint32_t endpoint_ip = 0; // host order
};

// "SOCKET=IP[,SOCKET=IP...]" (--memif). False with `err` set on a bad list.
bool parse_memif_ports(const std::string &text, std::vector<MemifPortSpec> &out, std::string &err);

// Starts the EAL (once per process) and serves one memif socket per spec; port i's
// endpoint is {endpoint_ip, 0} (add_port with that address). Empty with `err` set on failure.
std::vector<std::unique_ptr<PortIo>> open_memif_ports(const std::vector<MemifPortSpec> &specs, std::string &err);

} // namespace ibex::sw
