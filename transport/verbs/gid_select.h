// Which entry of a port's GID table a RoCE QP sends from. The table holds, per network
// device and address, a RoCE v1 and a RoCE v2 entry (plus the link-local ones derived
// from the MAC); only RoCE v2 is routable over UDP/IP, so ibex picks a v2 entry: an
// IPv4-mapped one first, then a global IPv6, then the link-local one; within a kind, the
// port's own (untagged) netdev before a VLAN/macvlan/bond on top of it. Pure: the table
// comes from DeviceSysfs (or a test).
#pragma once

#include <string>

#include "transport/verbs/sysfs.h"

namespace ibex::verbs {

enum class GidFamily : uint8_t { kAny, kIpv4, kIpv6 };

struct GidPolicy {
    int forced_index = -1;  // IBEX_GID_INDEX: use exactly this entry
    GidFamily family = GidFamily::kAny; // IBEX_GID_FAMILY=ipv4|ipv6
    std::string netdev;     // IBEX_GID_NETDEV: only entries of this netdev ("eth0.100")
    bool has_address = false; // a local address (context attr or IBEX_GID_ADDR) to match exactly
    uint8_t address[16] = {};

    // Reads IBEX_GID_INDEX, IBEX_GID_FAMILY, IBEX_GID_NETDEV, IBEX_GID_ADDR; a malformed
    // value is an error (named in *error), not silently ignored.
    static bool from_env(GidPolicy *out, std::string *error);
    // Accepts "192.0.2.1" (stored as ::ffff:192.0.2.1) or an IPv6 literal.
    bool set_address(const char *text);
};

struct GidChoice {
    int index = -1;        // -1: none (see reason)
    GidEntry entry;
    std::string reason;    // why this entry, or why none
};

GidChoice select_gid(const PortInfo &port, const GidPolicy &policy);

} // namespace ibex::verbs
