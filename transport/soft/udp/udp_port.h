// The udp port of the soft provider: RoCEv2 over a kernel UDP socket on port 4791.
// The kernel writes the IP and UDP headers; ibex makes the fields the ICRC covers
// predictable by sending with DF set from an unconnected socket: IP ID 0, and for the
// segments of a UDP GSO train IDs 0, 1, 2, ... (each segment's ICRC is made for its ID).
#pragma once

#include <memory>
#include <string>

#include <ibex/ibex.h>

#include "transport/soft/port.h"

namespace ibex::soft {

struct UdpPortOptions {
    std::string device;      // "udp:lo", "udp:eth0", "udp:10.0.0.1" (optionally ":port")
    std::string local_addr;  // overrides the address from the device name
    uint16_t port = 0;       // 0: 4791 (or the port in the device name)
    bool gso = true;         // UDP GSO for runs of equal-size packets
    bool gro = true;         // UDP GRO on receive
    int socket_buffer = 8 << 20;
};

// Opens the port or returns nullptr with the error recorded (ibex::fail).
std::unique_ptr<Port> open_udp_port(const UdpPortOptions &opts, ibex_status_t *status);

// True if `device` names a udp-port device ("udp:..." prefix).
bool is_udp_device(const char *device);

} // namespace ibex::soft
