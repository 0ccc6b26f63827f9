#include "transport/soft/dpdk/device_spec.h"

#include <arpa/inet.h>
#include <charconv>
#include <cstdio>
#include <cstring>

namespace ibex::soft::dpdk {
namespace {

bool parse_uint(const std::string &s, long max, long *out) {
    long v = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || p != s.data() + s.size() || v < 0 || v > max) return false;
    *out = v;
    return true;
}

std::vector<std::string> split(const std::string &s, char sep) {
    std::vector<std::string> out;
    size_t start = 0;
    for (;;) {
        const size_t at = s.find(sep, start);
        out.push_back(s.substr(start, at - start));
        if (at == std::string::npos) return out;
        start = at + 1;
    }
}

} // namespace

bool is_dpdk_device(const char *device) { return device && std::strncmp(device, "dpdk:", 5) == 0; }

bool parse_ipv4(const std::string &text, uint32_t *ip) {
    in_addr a{};
    if (inet_pton(AF_INET, text.c_str(), &a) != 1) return false;
    *ip = ntohl(a.s_addr);
    return true;
}

std::string format_ipv4(uint32_t ip) {
    char b[16];
    std::snprintf(b, sizeof b, "%u.%u.%u.%u", ip >> 24, (ip >> 16) & 255, (ip >> 8) & 255, ip & 255);
    return b;
}

bool parse_mac(const std::string &text, uint8_t mac[6]) {
    const auto parts = split(text, ':');
    if (parts.size() != 6) return false;
    for (int i = 0; i < 6; ++i) {
        unsigned v = 0;
        auto [p, ec] = std::from_chars(parts[i].data(), parts[i].data() + parts[i].size(), v, 16);
        if (ec != std::errc() || p != parts[i].data() + parts[i].size() || parts[i].empty() || v > 255) return false;
        mac[i] = static_cast<uint8_t>(v);
    }
    return true;
}

bool parse_neighbours(const std::string &text, std::vector<StaticNeighbour> *out) {
    if (text.empty()) return true;
    for (const std::string &entry : split(text, ';')) {
        if (entry.empty()) continue;
        const size_t at = entry.find('@');
        StaticNeighbour n;
        if (at == std::string::npos || !parse_ipv4(entry.substr(0, at), &n.ip) || !parse_mac(entry.substr(at + 1), n.mac))
            return false;
        out->push_back(n);
    }
    return true;
}

bool parse_device(const std::string &device, DeviceSpec *out, std::string *error) {
    if (device.compare(0, 5, "dpdk:") != 0) {
        *error = "not a dpdk device (dpdk:...)";
        return false;
    }
    const std::string body = device.substr(5);
    // The target ends at the first comma; a memif socket path cannot hold one.
    const size_t comma = body.find(',');
    const std::string target = body.substr(0, comma);
    DeviceSpec s;
    auto after = [&](const char *prefix) { return target.substr(std::strlen(prefix)); };
    if (target == "memif" || target.compare(0, 6, "memif:") == 0) {
        s.target = Target::kMemif;
        s.name = target.size() > 6 ? after("memif:") : "";
    } else if (target.compare(0, 10, "af_packet:") == 0) {
        s.target = Target::kAfPacket;
        s.name = after("af_packet:");
    } else if (target.compare(0, 7, "af_xdp:") == 0) {
        s.target = Target::kAfXdp;
        s.name = after("af_xdp:");
    } else if (target.compare(0, 4, "pci:") == 0) {
        s.target = Target::kPci;
        s.name = after("pci:");
    } else if (target.compare(0, 5, "port:") == 0) {
        s.target = Target::kPort;
        s.name = after("port:");
        long v;
        if (!parse_uint(s.name, 65535, &v)) {
            *error = "port:<n> needs an ethdev port number";
            return false;
        }
    } else if (target.compare(0, 4, "net_") == 0) {
        s.target = Target::kVdev;
        s.name = target;
    } else {
        *error = "unknown target \"" + target + "\" (memif[:socket], af_packet:<if>, af_xdp:<if>, pci:<addr>, port:<n>, net_<driver>)";
        return false;
    }
    if (s.name.empty() && s.target != Target::kMemif) {
        *error = "target \"" + target + "\" needs a name after the colon";
        return false;
    }
    if (comma != std::string::npos) {
        for (const std::string &kv : split(body.substr(comma + 1), ',')) {
            if (kv.empty()) continue;
            const size_t eq = kv.find('=');
            const std::string key = kv.substr(0, eq);
            const std::string val = eq == std::string::npos ? "" : kv.substr(eq + 1);
            long v = 0;
            bool ok = true;
            if (key == "ip") {
                const size_t slash = val.find('/');
                ok = parse_ipv4(val.substr(0, slash), &s.ip);
                if (ok && slash != std::string::npos) ok = parse_uint(val.substr(slash + 1), 32, &v), s.prefix_len = uint8_t(v);
            } else if (key == "mac") {
                ok = s.has_mac = parse_mac(val, s.mac);
            } else if (key == "neigh") {
                ok = parse_neighbours(val, &s.neighbours);
            } else if (key == "vlan") {
                ok = parse_uint(val, 4094, &v), s.vlan = int(v);
            } else if (key == "pcp") {
                ok = parse_uint(val, 7, &v), s.pcp = int(v);
            } else if (key == "dscp") {
                ok = parse_uint(val, 63, &v), s.dscp = int(v);
            } else if (key == "role") {
                if (val == "server") s.role = MemifRole::kServer;
                else if (val == "client") s.role = MemifRole::kClient;
                else if (val == "auto") s.role = MemifRole::kAuto;
                else ok = false;
            } else if (key == "rxd" || key == "txd") {
                ok = parse_uint(val, 32768, &v) && v >= 64;
                (key == "rxd" ? s.rxd : s.txd) = uint16_t(v);
            } else if (key == "sleep_us") {
                ok = parse_uint(val, 1000000, &v), s.sleep_us = uint32_t(v);
            } else {
                s.pmd_args += (s.pmd_args.empty() ? "" : ",") + kv;
                continue;
            }
            if (!ok) {
                *error = "bad value in \"" + kv + "\"";
                return false;
            }
        }
    }
    *out = std::move(s);
    return true;
}

} // namespace ibex::soft::dpdk
