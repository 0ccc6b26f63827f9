// The switch's view of one port's packet I/O: receive RoCEv2 transport packets (BTH ..
// ICRC) with their addresses and TOS, send one with a given TOS. The udp implementation
// (udp_port_io.h) is a UDP socket on loopback; the DPDK memif one (memif_port_io.h) takes
// the same place, carrying whole Ethernet frames (whole_frames()).
#pragma once

#include <cstdint>
#include <span>

namespace ibex::sw {

// IPv4 address and UDP port, host order.
struct Addr {
    uint32_t ip = 0;
    uint16_t port = 0;
    bool operator==(const Addr &) const = default;
};

struct Frame {
    uint8_t *data = nullptr; // the port's receive buffer: valid until the next recv()
    uint32_t len = 0;
    Addr src;
    uint8_t tos = 0;
};

class PortIo {
public:
    virtual ~PortIo() = default;
    virtual Addr local() const = 0;
    // Up to out.size() frames without blocking; 0 when none are waiting.
    virtual int recv(std::span<Frame> out) = 0;
    // False when the packet could not leave (counted as a drop by the caller).
    virtual bool send(const uint8_t *data, uint32_t len, const Addr &to, uint8_t tos) = 0;
    virtual int wait_fd() const = 0; // readable when frames wait (-1: none)
    // True where frames are whole Ethernet frames that keep their IP addresses end to end
    // (memif_port_io.h): the switch then forwards them without checking or rewriting the
    // ICRC, and the port itself writes the TOS given to send() into the IP header.
    virtual bool whole_frames() const { return false; }
};

} // namespace ibex::sw
