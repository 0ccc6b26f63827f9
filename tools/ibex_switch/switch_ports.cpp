#include "tools/ibex_switch/switch_ports.h"

#include <cstdlib>
#include <sstream>

#include <ibex/ibex.h>

#include "transport/soft/dpdk/device_spec.h"
#include "transport/soft/udp/udp_port.h"

namespace ibex::sw {

std::unique_ptr<soft::Port> open_udp_switch_port(const soft::NetAddr &local, std::string &err) {
    soft::UdpPortOptions o;
    o.device = "udp:" + format_addr(local);
    o.local_addr = soft::dpdk::format_ipv4(local.ip); // this address, whatever IBEX_UDP_ADDR says
    // The switch's own buffer is what it models; the kernel's should only absorb a
    // scheduling hiccup of the switch thread.
    o.socket_buffer = 4 << 20;
    // One datagram per packet both ways: the switch queues, marks and shapes each one.
    o.gso = false;
    o.gro = false;
    ibex_status_t st;
    std::unique_ptr<soft::Port> port = soft::open_udp_port(o, &st);
    if (!port) err = ibex_last_error();
    return port;
}

bool parse_memif_ports(const std::string &text, std::vector<soft::MemifFabricPort> &out, std::string &err) {
    std::stringstream ss(text);
    std::string item;
    while (std::getline(ss, item, ',')) {
        const size_t eq = item.rfind('=');
        soft::MemifFabricPort p;
        if (eq == std::string::npos || eq == 0 || !soft::dpdk::parse_ipv4(item.substr(eq + 1), &p.endpoint_ip)) {
            err = "bad memif port \"" + item + "\" (want SOCKET=IP)";
            return false;
        }
        p.socket = item.substr(0, eq);
        out.push_back(p);
    }
    return true;
}

bool parse_addr(const std::string &text, soft::NetAddr &out) {
    const size_t colon = text.rfind(':');
    if (!soft::dpdk::parse_ipv4(colon == std::string::npos ? text : text.substr(0, colon), &out.ip)) return false;
    out.port = 4791;
    if (colon != std::string::npos) {
        char *end = nullptr;
        const long p = std::strtol(text.c_str() + colon + 1, &end, 10);
        if (*end || p < 0 || p > 65535) return false;
        out.port = static_cast<uint16_t>(p);
    }
    return true;
}

std::string format_addr(const soft::NetAddr &a) { return soft::dpdk::format_ipv4(a.ip) + ":" + std::to_string(a.port); }

} // namespace ibex::sw
