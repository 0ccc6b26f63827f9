// Invariant CRC of RoCEv2 (IBA annex A17): CRC-32 over 8 bytes of 0xff, the IP header with
// TOS/TTL/checksum masked, the UDP header with the checksum masked, the BTH with byte 4
// (FECN/BECN/reserved) masked, and everything after it up to the ICRC. The 4-byte result
// goes on the wire little-endian. The CRC is ISA-L's carry-less-multiply CRC-32, because
// it runs over every payload byte.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <sys/uio.h>

namespace ibex::roce {

// The IPv4/UDP fields the ICRC covers. Addresses and ports in host order.
struct IcrcIpv4Fields {
    uint32_t src_ip = 0;
    uint32_t dst_ip = 0;
    uint16_t src_port = 0;
    uint16_t dst_port = 4791;
    uint16_t ip_id = 0;
    uint16_t frag = 0x4000; // flags + fragment offset: DF set, as ibex sends
    bool operator==(const IcrcIpv4Fields &) const = default;
};

// CRC-32 (zlib/Ethernet) continuing from `crc` (0 to start).
uint32_t crc32(uint32_t crc, const void *data, size_t len);

// ICRC of a packet whose transport bytes (BTH first, through the pad, without the ICRC)
// are the concatenation of `pieces`; transport_len is their total length.
uint32_t icrc_ipv4(const IcrcIpv4Fields &f, std::span<const iovec> pieces, size_t transport_len);

// The ICRC's running CRC over the masked IP/UDP fields and the first head_len bytes of a
// contiguous packet's transport bytes (BTH first, head_len >= kBthLen; transport_len as
// for icrc_ipv4). Continued with crc32() or crc32_copy() over the bytes that follow, up to
// the ICRC, it gives icrc_ipv4(): a receiver checks the payload while it copies it out.
uint32_t icrc_ipv4_begin(const IcrcIpv4Fields &f, const uint8_t *transport, size_t head_len, size_t transport_len);

// icrc_ipv4_begin in two steps: the masked IP/UDP part alone, which is the same for every
// packet of one length between two endpoints, and its continuation over the headers.
uint32_t icrc_ipv4_prefix(const IcrcIpv4Fields &f, size_t transport_len);
uint32_t icrc_ipv4_headers(uint32_t prefix_crc, const uint8_t *transport, size_t head_len);

// The last prefix CRC computed, kept: a stream of full-MTU packets between two endpoints
// computes it once.
class IcrcPrefixCache {
public:
    uint32_t prefix(const IcrcIpv4Fields &f, size_t transport_len) {
        if (!valid_ || transport_len != len_ || !(f == fields_)) {
            crc_ = icrc_ipv4_prefix(f, transport_len);
            fields_ = f;
            len_ = transport_len;
            valid_ = true;
        }
        return crc_;
    }
    uint32_t begin(const IcrcIpv4Fields &f, const uint8_t *transport, size_t head_len, size_t transport_len) {
        return icrc_ipv4_headers(prefix(f, transport_len), transport, head_len);
    }

private:
    IcrcIpv4Fields fields_;
    size_t len_ = 0;
    uint32_t crc_ = 0;
    bool valid_ = false;
};

// ICRC of a whole IPv4 packet (IP header first, ICRC excluded from `len`).
// Returns false if the bytes are not IPv4/UDP.
bool icrc_ipv4_packet(const uint8_t *ip, size_t len, uint32_t *icrc);

inline void store_icrc(uint8_t *p, uint32_t icrc) {
    p[0] = uint8_t(icrc);
    p[1] = uint8_t(icrc >> 8);
    p[2] = uint8_t(icrc >> 16);
    p[3] = uint8_t(icrc >> 24);
}
inline uint32_t load_icrc(const uint8_t *p) {
    return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
}

} // namespace ibex::roce
