// What the kernel's RDMA core publishes about a device under
// /sys/class/infiniband/<dev>: ports, their state, the GID table with each entry's RoCE
// type and network device, and the port counters. Read through ibex::RootFs so tests
// point it at a fixture tree and production at "/". Pure file reading: no libibverbs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <ibex/ibex.h>

#include "runtime/base/rootfs.h"

namespace ibex::verbs {

enum class GidType : uint8_t { kUnknown, kIb, kRoceV1, kRoceV2 };

struct GidEntry {
    int index = -1;
    uint8_t gid[16] = {};
    GidType type = GidType::kUnknown;
    std::string ndev; // "" for InfiniBand GIDs
};

struct PortInfo {
    int port = 0;
    bool active = false;       // state "4: ACTIVE"
    std::string link_layer;    // "Ethernet" or "InfiniBand"
    std::vector<GidEntry> gids; // populated entries only, by index
    // Network devices of the function itself (<dev>/device/net/*): the untagged netdev a
    // GID is preferred on, as opposed to a VLAN, macvlan or bond on top of it.
    std::vector<std::string> base_netdevs;
};

// Parses the sysfs form "fe80:0000:0000:0000:0202:c9ff:fe00:0001" (8 groups of 1..4 hex).
bool parse_sysfs_gid(const std::string &text, uint8_t out[16]);
// The text of a gid_attrs/types entry: "RoCE v2", "IB/RoCE v1", "IB".
GidType parse_gid_type(const std::string &text);
const char *gid_type_name(GidType type);
// "::ffff:192.0.2.1", "fe80::1", ... (inet_ntop of the GID as an IPv6 address).
std::string gid_to_string(const uint8_t gid[16]);
bool gid_is_ipv4_mapped(const uint8_t gid[16]);
bool gid_is_zero(const uint8_t gid[16]);

class DeviceSysfs {
public:
    // root: "/" in production. The device's directory is <root>/sys/class/infiniband/<dev>.
    DeviceSysfs(const ibex::RootFs &fs, std::string device) : fs_(fs), device_(std::move(device)) {}

    bool exists() const;
    // Port numbers present under ports/, ascending.
    std::vector<int> ports() const;
    // False (with *error) when the port's directory cannot be read at all.
    bool read_port(int port, PortInfo *out, std::string *error) const;
    // Port and hardware counters as ibex names them (missing files read as 0).
    void read_counters(int port, ibex_counters_t *out) const;

    const std::string &device() const { return device_; }
    std::string port_dir(int port) const;

private:
    uint64_t read_u64(const std::string &path) const;

    const ibex::RootFs &fs_;
    std::string device_;
};

// MTU of a network device (/sys/class/net/<ndev>/mtu), 0 if unknown.
int netdev_mtu(const ibex::RootFs &fs, const std::string &ndev);

// Names of the RDMA devices under <root>/sys/class/infiniband, sorted.
std::vector<std::string> list_sysfs_devices(const ibex::RootFs &fs);

} // namespace ibex::verbs
