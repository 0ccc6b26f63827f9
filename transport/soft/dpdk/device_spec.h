// The grammar of dpdk device names (see README.md in this folder):
//
//   dpdk:<target>[,<key>=<value>]...
//   target: memif[:<socket path>] | af_packet:<ifname> | af_xdp:<ifname>
//           | pci:<address> | port:<ethdev port id> | net_<driver>[<suffix>]
//
// Keys ibex understands (ip, mac, neigh, vlan, pcp, dscp, role, rxd, txd, sleep_us) are
// taken out; every other key=value is handed to the PMD as a device argument.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "transport/soft/port.h"

namespace ibex::soft::dpdk {

enum class Target { kMemif, kAfPacket, kAfXdp, kPci, kPort, kVdev };
enum class MemifRole { kAuto, kServer, kClient };

struct StaticNeighbour {
    uint32_t ip = 0;
    uint8_t mac[6] = {};
};

struct DeviceSpec {
    Target target = Target::kMemif;
    std::string name;          // socket path, ifname, PCI address, port id, or vdev driver name
    std::string pmd_args;      // "k=v,k=v" for the PMD
    uint32_t ip = 0;           // 0: not given
    uint8_t prefix_len = 0;
    bool has_mac = false;
    uint8_t mac[6] = {};
    std::vector<StaticNeighbour> neighbours;
    int vlan = -1;             // -1: untagged
    int pcp = -1;              // -1: from DSCP (top three bits)
    int dscp = -1;             // -1: the QP's traffic class decides
    MemifRole role = MemifRole::kAuto;
    uint16_t rxd = 1024;
    uint16_t txd = 1024;
    uint32_t sleep_us = 0;     // 0: IBEX_DPDK_SLEEP_US or its default
};

bool is_dpdk_device(const char *device);

// Parses `device` ("dpdk:..."); on failure returns false with a message in *error.
bool parse_device(const std::string &device, DeviceSpec *out, std::string *error);

// "A.B.C.D" -> host-order address, and back.
bool parse_ipv4(const std::string &text, uint32_t *ip);
std::string format_ipv4(uint32_t ip);
bool parse_mac(const std::string &text, uint8_t mac[6]);
// "ip@mac[;ip@mac...]" (IBEX_DPDK_NEIGH and the neigh= key, which may repeat).
bool parse_neighbours(const std::string &text, std::vector<StaticNeighbour> *out);

} // namespace ibex::soft::dpdk
