// Helpers shared by the codec tests. Everything here is written from REFERENCE.md
// sections 1-2 and deliberately does NOT use the codec's own put*/encode_* helpers or its
// opcode table, so a layout, byte-order or table bug in the codec cannot cancel itself
// out in a round trip.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string_view>
#include <vector>

namespace ibex::roce::test {

// Big-endian byte appender.
class Bytes {
public:
    Bytes &u8(uint8_t v) {
        b_.push_back(v);
        return *this;
    }
    Bytes &be16(uint16_t v) { return u8(uint8_t(v >> 8)).u8(uint8_t(v)); }
    Bytes &be24(uint32_t v) { return u8(uint8_t(v >> 16)).u8(uint8_t(v >> 8)).u8(uint8_t(v)); }
    Bytes &be32(uint32_t v) { return be16(uint16_t(v >> 16)).be16(uint16_t(v)); }
    Bytes &be64(uint64_t v) { return be32(uint32_t(v >> 32)).be32(uint32_t(v)); }
    Bytes &le32(uint32_t v) { return u8(uint8_t(v)).u8(uint8_t(v >> 8)).u8(uint8_t(v >> 16)).u8(uint8_t(v >> 24)); }
    Bytes &raw(const std::vector<uint8_t> &v) {
        b_.insert(b_.end(), v.begin(), v.end());
        return *this;
    }
    Bytes &zeros(size_t n) {
        b_.insert(b_.end(), n, 0);
        return *this;
    }
    size_t size() const { return b_.size(); }
    std::vector<uint8_t> &vec() { return b_; }

private:
    std::vector<uint8_t> b_;
};

// Hex string to bytes; whitespace is ignored so vectors can be laid out by header.
inline std::vector<uint8_t> from_hex(std::string_view s) {
    auto nib = [](char c) -> int {
        if (c >= '0' && c <= '9') return c - '0';
        if (c >= 'a' && c <= 'f') return c - 'a' + 10;
        if (c >= 'A' && c <= 'F') return c - 'A' + 10;
        return -1;
    };
    std::vector<uint8_t> out;
    int hi = -1;
    for (char c : s) {
        if (c == ' ' || c == '\n' || c == '\t') continue;
        const int v = nib(c);
        if (v < 0) throw std::invalid_argument("bad hex digit");
        if (hi < 0) {
            hi = v;
        } else {
            out.push_back(uint8_t(hi << 4 | v));
            hi = -1;
        }
    }
    if (hi >= 0) throw std::invalid_argument("odd hex length");
    return out;
}

// Which headers follow the BTH, transcribed from REFERENCE.md section 1 "Which headers
// follow BTH". Payload: SEND and WRITE data packets and READ responses carry payload
// (FIRST/MIDDLE/LAST/ONLY wording of "Path MTU"); READ_REQUEST, ACKs and atomics do not.
// A CNP carries 16 reserved zero bytes, which are not payload.
struct RefHeaders {
    bool reth = false;
    bool aeth = false;
    bool imm = false;
    bool atomic_eth = false;
    bool atomic_ack_eth = false;
    bool payload = false;
    bool cnp = false;
};

inline std::optional<RefHeaders> reference_headers(uint8_t op) {
    RefHeaders h;
    switch (op) {
    case 0x00: case 0x01: case 0x02: case 0x04: // SEND FIRST/MIDDLE/LAST/ONLY
        h.payload = true;
        return h;
    case 0x03: case 0x05: // SEND_LAST/ONLY_WITH_IMM
        h.payload = h.imm = true;
        return h;
    case 0x06: case 0x0a: // WRITE FIRST/ONLY
        h.payload = h.reth = true;
        return h;
    case 0x07: case 0x08: // WRITE MIDDLE/LAST
        h.payload = true;
        return h;
    case 0x09: // WRITE_LAST_WITH_IMM
        h.payload = h.imm = true;
        return h;
    case 0x0b: // WRITE_ONLY_WITH_IMM: RETH then ImmDt
        h.payload = h.reth = h.imm = true;
        return h;
    case 0x0c: // READ_REQUEST
        h.reth = true;
        return h;
    case 0x0d: case 0x0f: case 0x10: // READ_RESPONSE FIRST/LAST/ONLY
        h.payload = h.aeth = true;
        return h;
    case 0x0e: // READ_RESPONSE_MIDDLE: no AETH
        h.payload = true;
        return h;
    case 0x11: // ACKNOWLEDGE
        h.aeth = true;
        return h;
    case 0x12: // ATOMIC_ACKNOWLEDGE
        h.aeth = h.atomic_ack_eth = true;
        return h;
    case 0x13: case 0x14: // COMPARE_SWAP, FETCH_ADD
        h.atomic_eth = true;
        return h;
    case 0x81: // CNP
        h.cnp = true;
        return h;
    default:
        return std::nullopt;
    }
}

// Every opcode ibex speaks (REFERENCE.md section 1, RC opcodes + CNP). 0x16/0x17
// (SEND_*_WITH_INVALIDATE) are listed in REFERENCE.md but carry an IETH that REFERENCE.md
// does not describe and the codec does not implement; see opcode_table_test.cpp.
inline std::vector<uint8_t> reference_opcodes() {
    std::vector<uint8_t> ops;
    for (int op = 0; op < 256; ++op)
        if (reference_headers(uint8_t(op))) ops.push_back(uint8_t(op));
    return ops;
}

inline size_t reference_ext_len(const RefHeaders &h) {
    return (h.reth ? 16 : 0) + (h.aeth ? 4 : 0) + (h.imm ? 4 : 0) + (h.atomic_eth ? 28 : 0) +
           (h.atomic_ack_eth ? 8 : 0);
}

// All fields of one transport packet.
struct PacketSpec {
    uint8_t opcode = 0;
    bool se = false, mig = false, fecn = false, becn = false, ack_req = false;
    uint16_t pkey = 0xffff;
    uint32_t qp = 0, psn = 0;
    uint64_t va = 0;
    uint32_t rkey = 0, dma_len = 0;
    uint8_t syndrome = 0x1f;
    uint32_t msn = 0;
    uint32_t imm = 0;
    uint64_t swap_add = 0, compare = 0, orig = 0;
    uint64_t atomic_va = 0;
    uint32_t atomic_rkey = 0;
    std::vector<uint8_t> payload;
    uint32_t icrc = 0;
};

struct BuiltPacket {
    std::vector<uint8_t> bytes; // BTH .. ICRC
    size_t hdr_len = 0;         // BTH + extension headers
    uint8_t pad = 0;
};

// Lays a packet out exactly as REFERENCE.md section 1 describes: BTH, then RETH,
// AtomicETH, AETH, AtomicAckETH, ImmDt as the opcode requires (RETH before ImmDt, AETH
// before AtomicAckETH), payload, zero pad to 4 bytes, ICRC little-endian.
inline BuiltPacket build_packet(const PacketSpec &s) {
    const RefHeaders h = reference_headers(s.opcode).value_or(RefHeaders{.payload = true});
    const size_t plen = h.payload ? s.payload.size() : 0;
    const uint8_t pad = uint8_t((4 - plen % 4) % 4);
    Bytes b;
    b.u8(s.opcode)
        .u8(uint8_t((s.se ? 0x80 : 0) | (s.mig ? 0x40 : 0) | pad << 4))
        .be16(s.pkey)
        .u8(uint8_t((s.fecn ? 0x80 : 0) | (s.becn ? 0x40 : 0)))
        .be24(s.qp)
        .u8(s.ack_req ? 0x80 : 0)
        .be24(s.psn);
    if (h.reth) b.be64(s.va).be32(s.rkey).be32(s.dma_len);
    if (h.atomic_eth) b.be64(s.atomic_va).be32(s.atomic_rkey).be64(s.swap_add).be64(s.compare);
    if (h.aeth) b.u8(s.syndrome).be24(s.msn);
    if (h.atomic_ack_eth) b.be64(s.orig);
    if (h.imm) b.be32(s.imm);
    BuiltPacket out;
    out.hdr_len = b.size();
    out.pad = pad;
    if (h.cnp) b.zeros(16);
    if (h.payload) b.raw(s.payload).zeros(pad);
    b.le32(s.icrc);
    out.bytes = std::move(b.vec());
    return out;
}

// A full IPv4/UDP packet (no Ethernet) around transport bytes that end with a 4-byte ICRC.
struct Ipv4Spec {
    uint8_t tos = 0;
    uint16_t id = 0;
    uint16_t frag = 0x4000;
    uint8_t ttl = 64;
    uint16_t ip_csum = 0;
    uint32_t src = 0, dst = 0;
    uint16_t sport = 0xc000, dport = 4791;
    uint16_t udp_csum = 0;
};

inline std::vector<uint8_t> build_ipv4(const Ipv4Spec &s, const std::vector<uint8_t> &transport_with_icrc) {
    const size_t n = transport_with_icrc.size();
    Bytes b;
    b.u8(0x45).u8(s.tos).be16(uint16_t(20 + 8 + n)).be16(s.id).be16(s.frag).u8(s.ttl).u8(17).be16(s.ip_csum);
    b.be32(s.src).be32(s.dst);
    b.be16(s.sport).be16(s.dport).be16(uint16_t(8 + n)).be16(s.udp_csum);
    b.raw(transport_with_icrc);
    return std::move(b.vec());
}

} // namespace ibex::roce::test
