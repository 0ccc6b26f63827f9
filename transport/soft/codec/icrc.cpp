#include "transport/soft/codec/icrc.h"

#include <algorithm>
#include <cstring>
#include <isa-l/crc.h>

#include "transport/soft/codec/crc32_wide.h"
#include "transport/soft/codec/roce.h"

namespace ibex::roce {
namespace {

constexpr size_t kPrefixLen = 8 + 20 + 8; // LRH stand-in, IPv4, UDP

uint32_t crc32_isal(uint32_t crc, const void *data, size_t len) {
    return crc32_gzip_refl(crc, static_cast<const unsigned char *>(data), len);
}

} // namespace

uint32_t crc32(uint32_t crc, const void *data, size_t len) {
    // Chosen once: the widest folding kernel the CPU has (ISA-L's for short buffers), else ISA-L's.
    static const auto kernel = crc32_wide_available() ? &crc32_wide : &crc32_isal;
    return kernel(crc, data, len);
}

namespace {

// The 8 bytes of 0xff, then the IPv4 and UDP headers with the variant fields masked, into
// buf (kPrefixLen bytes), for a packet of transport_len bytes before its ICRC.
void write_prefix(uint8_t *buf, const IcrcIpv4Fields &f, size_t transport_len) {
    std::memset(buf, 0xff, 8);
    uint8_t *ip = buf + 8;
    const size_t roce_len = transport_len + kIcrcLen;
    ip[0] = 0x45;
    ip[1] = 0xff;
    put16(ip + 2, uint16_t(20 + 8 + roce_len));
    put16(ip + 4, f.ip_id);
    put16(ip + 6, f.frag);
    ip[8] = 0xff;
    ip[9] = 17;
    ip[10] = ip[11] = 0xff;
    put32(ip + 12, f.src_ip);
    put32(ip + 16, f.dst_ip);
    uint8_t *udp = ip + 20;
    put16(udp, f.src_port);
    put16(udp + 2, f.dst_port);
    put16(udp + 4, uint16_t(8 + roce_len));
    udp[6] = udp[7] = 0xff;
}

} // namespace

uint32_t icrc_ipv4_prefix(const IcrcIpv4Fields &f, size_t transport_len) {
    uint8_t buf[kPrefixLen];
    write_prefix(buf, f, transport_len);
    return crc32(0, buf, sizeof buf);
}

uint32_t icrc_ipv4_headers(uint32_t prefix_crc, const uint8_t *transport, size_t head_len) {
    uint8_t bth[kBthLen];
    std::memcpy(bth, transport, kBthLen);
    bth[4] = 0xff;
    const uint32_t crc = crc32(prefix_crc, bth, kBthLen);
    return crc32(crc, transport + kBthLen, head_len - kBthLen);
}

uint32_t icrc_ipv4_begin(const IcrcIpv4Fields &f, const uint8_t *transport, size_t head_len, size_t transport_len) {
    return icrc_ipv4_headers(icrc_ipv4_prefix(f, transport_len), transport, head_len);
}

uint32_t icrc_ipv4(const IcrcIpv4Fields &f, std::span<const iovec> pieces, size_t transport_len) {
    uint8_t buf[kPrefixLen + kBthLen];
    write_prefix(buf, f, transport_len);

    // Gather the BTH (byte 4 masked) into buf. ibex normally puts the whole header block in
    // the first piece, but the BTH may straddle pieces (or a piece may be empty), so copy it
    // piece by piece rather than read 12 bytes past a short first piece.
    uint8_t *bth = buf + kPrefixLen;
    size_t have = 0, i = 0, off = 0;
    while (have < kBthLen && i < pieces.size()) {
        const size_t n = std::min(kBthLen - have, pieces[i].iov_len);
        if (n) std::memcpy(bth + have, pieces[i].iov_base, n);
        have += n;
        if (n == pieces[i].iov_len) {
            ++i;
        } else {
            off = n;
        }
    }
    if (have > 4) bth[4] = 0xff;
    uint32_t crc = crc32(0, buf, kPrefixLen + have);
    for (; i < pieces.size(); ++i, off = 0)
        if (pieces[i].iov_len > off)
            crc = crc32(crc, static_cast<const uint8_t *>(pieces[i].iov_base) + off, pieces[i].iov_len - off);
    return crc;
}

bool icrc_ipv4_packet(const uint8_t *ip, size_t len, uint32_t *icrc) {
    if (len < 20 || (ip[0] >> 4) != 4) return false;
    const size_t ihl = size_t(ip[0] & 0xf) * 4;
    if (ihl < 20 || len < ihl + 8 + kBthLen || ip[9] != 17) return false;
    uint8_t hdr[60 + 8];
    std::memcpy(hdr, ip, ihl + 8);
    hdr[1] = 0xff;
    hdr[8] = 0xff;
    hdr[10] = hdr[11] = 0xff;
    hdr[ihl + 6] = hdr[ihl + 7] = 0xff;
    static const uint8_t lrh[8] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    uint32_t crc = crc32(0, lrh, sizeof lrh);
    crc = crc32(crc, hdr, ihl + 8);
    uint8_t bth[kBthLen];
    std::memcpy(bth, ip + ihl + 8, kBthLen);
    bth[4] = 0xff;
    crc = crc32(crc, bth, kBthLen);
    const size_t rest = len - ihl - 8 - kBthLen;
    *icrc = crc32(crc, ip + ihl + 8 + kBthLen, rest);
    return true;
}

} // namespace ibex::roce
