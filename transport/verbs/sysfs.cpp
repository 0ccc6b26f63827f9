#include "transport/verbs/sysfs.h"

#include <algorithm>
#include <arpa/inet.h>
#include <cstdlib>
#include <cstring>

namespace ibex::verbs {
namespace {

constexpr const char *kClassDir = "/sys/class/infiniband";

int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

bool parse_int(const std::string &s, int *out) {
    if (s.empty() || s.size() > 6) return false;
    int v = 0;
    for (char c : s) {
        if (c < '0' || c > '9') return false;
        v = v * 10 + (c - '0');
    }
    *out = v;
    return true;
}

} // namespace

bool parse_sysfs_gid(const std::string &text, uint8_t out[16]) {
    int group = 0;
    size_t i = 0;
    while (group < 8) {
        unsigned v = 0;
        int digits = 0;
        while (i < text.size() && hex_value(text[i]) >= 0 && digits < 4) {
            v = v << 4 | static_cast<unsigned>(hex_value(text[i]));
            ++i;
            ++digits;
        }
        if (!digits) return false;
        out[group * 2] = static_cast<uint8_t>(v >> 8);
        out[group * 2 + 1] = static_cast<uint8_t>(v);
        ++group;
        if (group < 8) {
            if (i >= text.size() || text[i] != ':') return false;
            ++i;
        }
    }
    return i == text.size();
}

GidType parse_gid_type(const std::string &text) {
    if (text == "RoCE v2") return GidType::kRoceV2;
    if (text == "IB/RoCE v1" || text == "RoCE v1") return GidType::kRoceV1;
    if (text == "IB") return GidType::kIb;
    return GidType::kUnknown;
}

const char *gid_type_name(GidType type) {
    switch (type) {
    case GidType::kIb: return "IB";
    case GidType::kRoceV1: return "RoCE v1";
    case GidType::kRoceV2: return "RoCE v2";
    default: return "unknown";
    }
}

std::string gid_to_string(const uint8_t gid[16]) {
    char buf[INET6_ADDRSTRLEN];
    if (!inet_ntop(AF_INET6, gid, buf, sizeof buf)) return "?";
    return buf;
}

bool gid_is_ipv4_mapped(const uint8_t gid[16]) {
    static const uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    return std::memcmp(gid, prefix, sizeof prefix) == 0;
}

bool gid_is_zero(const uint8_t gid[16]) {
    for (int i = 0; i < 16; ++i)
        if (gid[i]) return false;
    return true;
}

std::string DeviceSysfs::port_dir(int port) const {
    return std::string(kClassDir) + "/" + device_ + "/ports/" + std::to_string(port);
}

bool DeviceSysfs::exists() const { return fs_.is_dir(std::string(kClassDir) + "/" + device_); }

std::vector<int> DeviceSysfs::ports() const {
    std::vector<std::string> names;
    std::vector<int> out;
    if (fs_.list_dir(std::string(kClassDir) + "/" + device_ + "/ports", names) != 0) return out;
    for (const auto &n : names) {
        int p;
        if (parse_int(n, &p) && p > 0) out.push_back(p);
    }
    std::sort(out.begin(), out.end());
    return out;
}

bool DeviceSysfs::read_port(int port, PortInfo *out, std::string *error) const {
    *out = PortInfo{};
    out->port = port;
    const std::string dir = port_dir(port);
    std::string state;
    int rc = fs_.read_file(dir + "/state", state);
    if (rc != 0) {
        *error = dir + "/state: " + ibex::RootFs::describe(rc);
        return false;
    }
    // "4: ACTIVE"; the number is the IB port state.
    out->active = state.rfind("4:", 0) == 0;
    if (fs_.read_file(dir + "/link_layer", out->link_layer) != 0) out->link_layer.clear();

    std::vector<std::string> names;
    if (fs_.list_dir(dir + "/gids", names) == 0) {
        for (const auto &n : names) {
            GidEntry e;
            std::string text;
            if (!parse_int(n, &e.index) || fs_.read_file(dir + "/gids/" + n, text) != 0) continue;
            if (!parse_sysfs_gid(text, e.gid) || gid_is_zero(e.gid)) continue;
            // Unpopulated entries make the kernel answer EINVAL for types/ndevs.
            std::string type;
            if (fs_.read_file(dir + "/gid_attrs/types/" + n, type) == 0) e.type = parse_gid_type(type);
            if (fs_.read_file(dir + "/gid_attrs/ndevs/" + n, e.ndev) != 0) e.ndev.clear();
            out->gids.push_back(std::move(e));
        }
        std::sort(out->gids.begin(), out->gids.end(), [](const GidEntry &a, const GidEntry &b) { return a.index < b.index; });
    }
    fs_.list_dir(std::string(kClassDir) + "/" + device_ + "/device/net", out->base_netdevs);
    return true;
}

uint64_t DeviceSysfs::read_u64(const std::string &path) const {
    std::string s;
    if (fs_.read_file(path, s) != 0 || s.empty()) return 0;
    return std::strtoull(s.c_str(), nullptr, 10);
}

void DeviceSysfs::read_counters(int port, ibex_counters_t *out) const {
    const uint32_t size = out->size;
    std::memset(out, 0, sizeof *out);
    out->size = size;
    const std::string c = port_dir(port) + "/counters/";
    const std::string h = port_dir(port) + "/hw_counters/";
    // The IB data counters count 4-byte words.
    out->tx_packets = read_u64(c + "port_xmit_packets");
    out->tx_bytes = read_u64(c + "port_xmit_data") * 4;
    out->rx_packets = read_u64(c + "port_rcv_packets");
    out->rx_bytes = read_u64(c + "port_rcv_data") * 4;
    out->rx_dropped_malformed = read_u64(c + "port_rcv_errors");
    out->rx_icrc_errors = read_u64(h + "rx_icrc_encapsulated");
    out->np_ecn_marked_roce_packets = read_u64(h + "np_ecn_marked_roce_packets");
    out->np_cnp_sent = read_u64(h + "np_cnp_sent");
    out->rp_cnp_handled = read_u64(h + "rp_cnp_handled");
    out->out_of_sequence = read_u64(h + "out_of_sequence");
    out->packet_seq_err = read_u64(h + "packet_seq_err");
    out->duplicate_request = read_u64(h + "duplicate_request");
    out->local_ack_timeout_err = read_u64(h + "local_ack_timeout_err");
    out->retransmitted_packets = read_u64(h + "roce_adp_retrans");
    out->rnr_nak_received = read_u64(h + "rnr_nak_retry_err");
    out->remote_access_errors = read_u64(h + "resp_remote_access_errors");
}

int netdev_mtu(const ibex::RootFs &fs, const std::string &ndev) {
    std::string s;
    if (ndev.empty() || ndev.find('/') != std::string::npos || fs.read_file("/sys/class/net/" + ndev + "/mtu", s) != 0)
        return 0;
    return std::atoi(s.c_str());
}

std::vector<std::string> list_sysfs_devices(const ibex::RootFs &fs) {
    std::vector<std::string> names;
    fs.list_dir(kClassDir, names);
    return names;
}

} // namespace ibex::verbs
