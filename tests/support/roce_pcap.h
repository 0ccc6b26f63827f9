// Test helper: the RoCEv2 frames of a classic pcap file (what `tshark -F pcap` writes), each
// with its IP fields, BTH fields and whether its ICRC is right for the IP header it carries
// (tshark does not check the ICRC).
#pragma once

#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "transport/soft/codec/icrc.h"
#include "transport/soft/codec/roce.h"

namespace ibex::test {

// One RoCEv2 frame as read from the classic pcap file.
struct Frame {
    unsigned number = 0; // 1-based, as tshark counts
    uint32_t src = 0, dst = 0;
    uint8_t tos = 0;
    uint16_t ip_id = 0, frag = 0;
    uint8_t opcode = 0;
    uint32_t dest_qp = 0, psn = 0;
    uint32_t payload_len = 0;
    uint8_t pad = 0;
    uint32_t dma_len = 0; // RETH, if present
    bool icrc_ok = false;
    uint32_t icrc_wire = 0, icrc_computed = 0;
};

// Classic pcap (either byte order, µs or ns), link types Ethernet, Linux cooked v1/v2, raw IP.
inline bool read_pcap(const std::string &path, std::vector<Frame> *out, std::string *err) {
    std::ifstream in(path, std::ios::binary);
    const std::string d((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (d.size() < 24) {
        *err = "pcap file shorter than its header";
        return false;
    }
    auto u32 = [&](size_t off, bool swap) {
        uint32_t v;
        std::memcpy(&v, d.data() + off, 4);
        return swap ? __builtin_bswap32(v) : v;
    };
    const uint32_t magic = u32(0, false);
    bool swap;
    if (magic == 0xa1b2c3d4 || magic == 0xa1b23c4d)
        swap = false;
    else if (magic == 0xd4c3b2a1 || magic == 0x4d3cb2a1)
        swap = true;
    else {
        *err = "not a classic pcap file";
        return false;
    }
    const uint32_t link = u32(20, swap) & 0xffff;
    size_t l2;
    switch (link) {
    case 1: l2 = 14; break;   // Ethernet (what lo gives)
    case 113: l2 = 16; break; // Linux cooked v1
    case 276: l2 = 20; break; // Linux cooked v2
    case 101: l2 = 0; break;  // raw IP
    case 228: l2 = 0; break;  // IPv4
    default: *err = "unexpected link type " + std::to_string(link); return false;
    }
    size_t off = 24;
    unsigned number = 0;
    while (off + 16 <= d.size()) {
        const uint32_t incl = u32(off + 8, swap), orig = u32(off + 12, swap);
        off += 16;
        if (off + incl > d.size()) {
            *err = "truncated packet record";
            return false;
        }
        ++number;
        const auto *p = reinterpret_cast<const uint8_t *>(d.data() + off);
        off += incl;
        if (incl != orig) {
            *err = "frame " + std::to_string(number) + " was cut by the snap length";
            return false;
        }
        if (incl < l2 + 20) continue;
        const uint8_t *ip = p + l2;
        if ((ip[0] >> 4) != 4 || ip[9] != 17) continue;
        const size_t ihl = size_t(ip[0] & 0xf) * 4;
        const size_t ip_len = ibex::roce::get16(ip + 2);
        if (ip_len > incl - l2 || ip_len < ihl + 8) continue;
        const uint8_t *udp = ip + ihl;
        if (ibex::roce::get16(udp + 2) != ibex::roce::kUdpPort) continue; // probes
        Frame f;
        f.number = number;
        f.src = ibex::roce::get32(ip + 12);
        f.dst = ibex::roce::get32(ip + 16);
        f.tos = ip[1];
        f.ip_id = ibex::roce::get16(ip + 4);
        f.frag = ibex::roce::get16(ip + 6);
        const size_t roce_len = ip_len - ihl - 8;
        if (roce_len < ibex::roce::kBthLen + ibex::roce::kIcrcLen) {
            *err = "frame " + std::to_string(number) + " too short for BTH + ICRC";
            return false;
        }
        const uint8_t *bth = udp + 8;
        const ibex::roce::Bth b = ibex::roce::decode_bth(bth);
        f.opcode = b.opcode;
        f.dest_qp = b.dest_qp;
        f.psn = b.psn;
        f.pad = b.pad_count;
        const size_t hdr = ibex::roce::kBthLen + ibex::roce::ext_header_len(ibex::roce::op_info(b.opcode).flags) +
                           (b.opcode == ibex::roce::kCnp ? ibex::roce::kCnpPayloadLen : 0);
        f.payload_len = roce_len >= hdr + b.pad_count + ibex::roce::kIcrcLen
                            ? static_cast<uint32_t>(roce_len - hdr - b.pad_count - ibex::roce::kIcrcLen)
                            : 0;
        if ((ibex::roce::op_info(b.opcode).flags & ibex::roce::kHasReth) && roce_len >= ibex::roce::kBthLen + ibex::roce::kRethLen)
            f.dma_len = ibex::roce::decode_reth(bth + ibex::roce::kBthLen).dma_len;
        f.icrc_wire = ibex::roce::load_icrc(ip + ip_len - ibex::roce::kIcrcLen);
        f.icrc_ok = ibex::roce::icrc_ipv4_packet(ip, ip_len - ibex::roce::kIcrcLen, &f.icrc_computed) &&
                    f.icrc_computed == f.icrc_wire;
        out->push_back(f);
    }
    return true;
}

} // namespace ibex::test
