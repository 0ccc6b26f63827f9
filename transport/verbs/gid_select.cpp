#include "transport/verbs/gid_select.h"

#include <arpa/inet.h>
#include <cstdlib>
#include <cstring>

namespace ibex::verbs {
namespace {

bool is_link_local(const uint8_t gid[16]) { return gid[0] == 0xfe && (gid[1] & 0xc0) == 0x80; }

bool family_ok(const GidEntry &e, GidFamily f) {
    if (f == GidFamily::kIpv4) return gid_is_ipv4_mapped(e.gid);
    if (f == GidFamily::kIpv6) return !gid_is_ipv4_mapped(e.gid);
    return true;
}

// Lower is better: IPv4-mapped, then global IPv6, then link-local IPv6 (the MAC-derived
// default GID, which reaches only the local L2 segment).
int rank(const GidEntry &e) {
    if (gid_is_ipv4_mapped(e.gid)) return 0;
    return is_link_local(e.gid) ? 2 : 1;
}

bool contains(const std::vector<std::string> &v, const std::string &s) {
    for (const auto &x : v)
        if (x == s) return true;
    return false;
}

} // namespace

bool GidPolicy::set_address(const char *text) {
    in_addr v4{};
    if (inet_pton(AF_INET, text, &v4) == 1) {
        std::memset(address, 0, sizeof address);
        address[10] = address[11] = 0xff;
        std::memcpy(address + 12, &v4, 4);
        has_address = true;
        return true;
    }
    if (inet_pton(AF_INET6, text, address) == 1) {
        has_address = true;
        return true;
    }
    return false;
}

bool GidPolicy::from_env(GidPolicy *out, std::string *error) {
    *out = GidPolicy{};
    if (const char *s = std::getenv("IBEX_GID_INDEX"); s && *s) {
        char *end = nullptr;
        const long v = std::strtol(s, &end, 10);
        if (*end || v < 0 || v > 65535) {
            *error = std::string("IBEX_GID_INDEX=\"") + s + "\" is not a GID index";
            return false;
        }
        out->forced_index = static_cast<int>(v);
    }
    if (const char *s = std::getenv("IBEX_GID_FAMILY"); s && *s) {
        if (!std::strcmp(s, "ipv4")) out->family = GidFamily::kIpv4;
        else if (!std::strcmp(s, "ipv6")) out->family = GidFamily::kIpv6;
        else if (!std::strcmp(s, "any")) out->family = GidFamily::kAny;
        else {
            *error = std::string("IBEX_GID_FAMILY=\"") + s + "\": expected ipv4, ipv6 or any";
            return false;
        }
    }
    if (const char *s = std::getenv("IBEX_GID_NETDEV"); s && *s) out->netdev = s;
    if (const char *s = std::getenv("IBEX_GID_ADDR"); s && *s) {
        if (!out->set_address(s)) {
            *error = std::string("IBEX_GID_ADDR=\"") + s + "\" is not an IPv4 or IPv6 address";
            return false;
        }
    }
    return true;
}

GidChoice select_gid(const PortInfo &port, const GidPolicy &policy) {
    GidChoice c;
    const std::string where = "port " + std::to_string(port.port);
    if (policy.forced_index >= 0) {
        for (const auto &e : port.gids) {
            if (e.index != policy.forced_index) continue;
            c.index = e.index;
            c.entry = e;
            c.reason = "GID index " + std::to_string(e.index) + " as configured (" + gid_type_name(e.type) + ", " +
                       gid_to_string(e.gid) + (e.ndev.empty() ? "" : " on " + e.ndev) + ")";
            return c;
        }
        c.reason = where + " has no populated GID at index " + std::to_string(policy.forced_index);
        return c;
    }
    if (port.link_layer == "InfiniBand") {
        c.reason = where + " is InfiniBand: ibex runs RoCE v2 only";
        return c;
    }

    const GidEntry *best = nullptr;
    int best_score = 0;
    int v2_seen = 0;
    for (const auto &e : port.gids) {
        if (e.type != GidType::kRoceV2) continue;
        ++v2_seen;
        if (policy.has_address) {
            if (std::memcmp(e.gid, policy.address, 16) != 0) continue;
        } else if (!family_ok(e, policy.family)) {
            continue;
        }
        if (!policy.netdev.empty() && e.ndev != policy.netdev) continue;
        // Score: address kind first (an IPv4 GID on a VLAN beats the MAC-derived
        // link-local GID of the untagged netdev), then the untagged netdev over netdevs
        // stacked on it; ties go to the lowest index, which the table order gives.
        const bool base = policy.netdev.empty() ? contains(port.base_netdevs, e.ndev) : true;
        const int score = rank(e) * 10 + (base ? 0 : 1);
        if (!best || score < best_score) {
            best = &e;
            best_score = score;
        }
    }
    if (best) {
        c.index = best->index;
        c.entry = *best;
        c.reason = "RoCE v2 GID " + std::to_string(best->index) + " (" + gid_to_string(best->gid) +
                   (best->ndev.empty() ? "" : " on " + best->ndev) + ")";
        return c;
    }
    if (!v2_seen) {
        c.reason = where + " has no RoCE v2 GID (is an IP address configured on its netdev?)";
    } else if (policy.has_address) {
        c.reason = where + " has no RoCE v2 GID for address " + gid_to_string(policy.address);
    } else {
        c.reason = where + " has no RoCE v2 GID matching" +
                   (policy.netdev.empty() ? std::string() : " netdev " + policy.netdev) +
                   (policy.family == GidFamily::kIpv4 ? " family ipv4" : policy.family == GidFamily::kIpv6 ? " family ipv6" : "");
    }
    return c;
}

} // namespace ibex::verbs
