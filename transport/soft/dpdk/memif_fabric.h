// ibex_switch's memif ports: port i serves memif socket i for the endpoint at endpoint_ip
// i, which connects as a client (`dpdk:memif:<socket i>,role=client,ip=<ip i>`). Each link
// is a dpdk port in whole-frame mode (port.h, whole_frames()): frames keep their IP
// addresses, and the switch forwards each one to the port of its destination IP, where
// only the Ethernet addresses and the IPv4 ECN bits (with the header checksum) are
// rewritten. Every port answers ARP for the other endpoints' addresses with its own MAC
// (proxy ARP), so endpoints need no neighbour configuration; the memif session
// (memif_session.h) runs on every link.
//
// As the switch sees them, port j's recv() gives the frames any link received for endpoint
// j's address (those the switch queues for egress j), each with src = {IP of the endpoint
// it came from, 0}; send() goes out on the link of the destination's IP, whichever port
// it is called on. The ports have no wait descriptor (wait_fd() -1): they are polled.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <ibex/ibex.h>

#include "transport/soft/port.h"

namespace ibex::soft {

struct MemifFabricPort {
    std::string socket;
    uint32_t endpoint_ip = 0; // host order
};

// Starts the EAL (once per process) and serves one memif socket per entry; port i's
// local() is {endpoint_ip i, 0}. Empty with the error recorded (ibex::fail) on failure;
// built without DPDK, it fails with IBEX_ERR_NOT_SUPPORTED.
std::vector<std::unique_ptr<Port>> open_memif_fabric(const std::vector<MemifFabricPort> &ports, ibex_status_t *status);

} // namespace ibex::soft
