// ICRC (REFERENCE.md section 2) against vectors that do not come from this code:
//  (1) a CNP captured from a ConnectX-4 Lx (REFERENCE.md section 2, and the same frame in
//      shared/testdata/roce-cnp-connectx4.pcap);
//  (2) a RDMA_WRITE_ONLY with payload and pad whose ICRC was computed with Python's zlib;
// plus properties: masked fields do not matter, every covered byte does, and splitting
// the transport bytes into iovecs changes nothing.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <sys/uio.h>
#include <vector>

#include <gtest/gtest.h>

#include "transport/soft/codec/crc32_wide.h"
#include "transport/soft/codec/icrc.h"
#include "transport/soft/codec/packet.h"
#include "transport/soft/codec/roce.h"
#include "tests/transport/soft/codec/codec_test_util.h"

namespace ibex::roce {
namespace {

using test::from_hex;

// ---------------------------------------------------------------- vector (1): CNP
// Whole Ethernet frame copied from REFERENCE.md section 2 (a ConnectX-4 Lx CNP published
// in a packet library's test suite). Its last 4 bytes, 82 fd 00 2a, are the ICRC the NIC
// put on the wire, i.e. CRC value 0x2a00fd82 stored little-endian. Cross-checked while
// writing this test with
//   python3 -c "import zlib;print(hex(zlib.crc32(bytes.fromhex('ffffffffffffffff 45ff003c718c4000ff11ffff0a0011010a001201 000012b70028ffff 8100ffffff00011800000000 00000000000000000000000000000000'))))"
// which prints 0x2a00fd82 (frame with TOS, TTL, IP/UDP checksums and BTH byte 4 set to 0xff).
const char kCnpFrameHex[] =
    "e41d2dab2bc2 7cfe90643b32 0800"
    "45c2 003c 718c 4000 4011 9161 0a001101 0a001201"
    "0000 12b7 0028 0000"
    "81 00 ffff 40 000118 00 000000"
    "00000000000000000000000000000000"
    "82fd002a";
constexpr uint32_t kCnpIcrc = 0x2a00fd82;
constexpr size_t kEthLen = 14, kIpLen = 20, kUdpLen = 8;

IcrcIpv4Fields cnp_fields() {
    IcrcIpv4Fields f;
    f.src_ip = 0x0a001101; // 10.0.17.1
    f.dst_ip = 0x0a001201; // 10.0.18.1
    f.src_port = 0;
    f.dst_port = 4791;
    f.ip_id = 0x718c;
    f.frag = 0x4000;
    return f;
}

uint32_t icrc_of_pieces(const IcrcIpv4Fields &f, const std::vector<std::pair<const uint8_t *, size_t>> &pieces) {
    std::vector<iovec> iov;
    size_t total = 0;
    for (auto [p, n] : pieces) {
        iov.push_back({const_cast<uint8_t *>(p), n});
        total += n;
    }
    return icrc_ipv4(f, iov, total);
}

TEST(Crc32, StandardCheckValue) {
    // CRC-32/ISO-HDLC ("zlib") check value of "123456789" is 0xcbf43926 (CRC catalogue).
    const char msg[] = "123456789";
    EXPECT_EQ(crc32(0, msg, 9), 0xcbf43926u);
    // Continuation: crc over "1234" then "56789" equals crc over the whole.
    EXPECT_EQ(crc32(crc32(0, msg, 4), msg + 4, 5), 0xcbf43926u);
    EXPECT_EQ(crc32(0, msg, 0), 0u);
}

TEST(IcrcCnp, WholeIpv4PacketFromReference) {
    const auto frame = from_hex(kCnpFrameHex);
    ASSERT_EQ(frame.size(), 74u);
    EXPECT_EQ(load_icrc(frame.data() + frame.size() - 4), kCnpIcrc);
    uint32_t icrc = 0;
    ASSERT_TRUE(icrc_ipv4_packet(frame.data() + kEthLen, frame.size() - kEthLen - kIcrcLen, &icrc));
    EXPECT_EQ(icrc, kCnpIcrc);
}

TEST(IcrcCnp, FieldsTakenFromTheFrame) {
    const auto frame = from_hex(kCnpFrameHex);
    const uint8_t *bth = frame.data() + kEthLen + kIpLen + kUdpLen;
    const size_t transport_len = frame.size() - kEthLen - kIpLen - kUdpLen - kIcrcLen;
    ASSERT_EQ(transport_len, 28u);
    EXPECT_EQ(icrc_of_pieces(cnp_fields(), {{bth, transport_len}}), kCnpIcrc);
}

TEST(IcrcCnp, ParseThenVerify) {
    // How a receiver uses the two together: parse the UDP payload, then recompute the
    // ICRC over view.transport_len bytes and compare with view.icrc.
    const auto frame = from_hex(kCnpFrameHex);
    const uint8_t *udp_payload = frame.data() + kEthLen + kIpLen + kUdpLen;
    PacketView v;
    ASSERT_EQ(parse_packet(udp_payload, frame.size() - kEthLen - kIpLen - kUdpLen, &v), ParseError::kOk);
    EXPECT_EQ(v.bth.opcode, kCnp);
    EXPECT_TRUE(v.bth.becn);
    EXPECT_FALSE(v.bth.fecn);
    EXPECT_EQ(v.bth.pkey, 0xffff);
    EXPECT_EQ(v.bth.dest_qp, 0x000118u);
    EXPECT_EQ(v.bth.psn, 0u);
    EXPECT_EQ(v.icrc, kCnpIcrc);
    EXPECT_EQ(icrc_of_pieces(cnp_fields(), {{udp_payload, v.transport_len}}), v.icrc);
}

// Reads the one frame of a classic (libpcap 2.4) capture file.
bool read_single_pcap_frame(const std::string &path, std::vector<uint8_t> *frame, std::string *why) {
    std::ifstream in(path, std::ios::binary);
    const std::vector<uint8_t> f((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (f.size() < 24 + 16) return *why = "file shorter than pcap headers", false;
    const uint32_t magic_le = uint32_t(f[0]) | uint32_t(f[1]) << 8 | uint32_t(f[2]) << 16 | uint32_t(f[3]) << 24;
    bool le;
    if (magic_le == 0xa1b2c3d4 || magic_le == 0xa1b23c4d) {
        le = true;
    } else if (magic_le == 0xd4c3b2a1 || magic_le == 0x4d3cb2a1) {
        le = false;
    } else {
        return *why = "not a classic pcap", false;
    }
    auto u32 = [&](size_t o) {
        return le ? uint32_t(f[o]) | uint32_t(f[o + 1]) << 8 | uint32_t(f[o + 2]) << 16 | uint32_t(f[o + 3]) << 24
                  : uint32_t(f[o]) << 24 | uint32_t(f[o + 1]) << 16 | uint32_t(f[o + 2]) << 8 | uint32_t(f[o + 3]);
    };
    if (u32(20) != 1) return *why = "link type is not Ethernet", false;
    const uint32_t incl = u32(24 + 8);
    if (f.size() < 24 + 16 + size_t(incl)) return *why = "truncated record", false;
    frame->assign(f.begin() + 40, f.begin() + 40 + incl);
    return true;
}

TEST(IcrcCnp, FrameFromPcap) {
    // IBEX_SHARED_DIR wins; the build passes the checkout's ../shared as a fallback.
    const char *shared = std::getenv("IBEX_SHARED_DIR");
#ifdef IBEX_CODEC_DEFAULT_SHARED_DIR
    if (!shared) shared = IBEX_CODEC_DEFAULT_SHARED_DIR;
#endif
    if (!shared) GTEST_SKIP() << "IBEX_SHARED_DIR not set and no default shared dir";
    const std::string path = std::string(shared) + "/testdata/roce-cnp-connectx4.pcap";
    if (!std::ifstream(path).good()) GTEST_SKIP() << "capture not present: " << path;
    std::vector<uint8_t> frame;
    std::string why;
    ASSERT_TRUE(read_single_pcap_frame(path, &frame, &why)) << why;
    ASSERT_EQ(frame.size(), 74u);
    // The capture is the frame REFERENCE.md prints.
    EXPECT_EQ(frame, from_hex(kCnpFrameHex));
    uint32_t icrc = 0;
    ASSERT_TRUE(icrc_ipv4_packet(frame.data() + kEthLen, frame.size() - kEthLen - kIcrcLen, &icrc));
    EXPECT_EQ(icrc, load_icrc(frame.data() + frame.size() - kIcrcLen));
    EXPECT_EQ(icrc, kCnpIcrc);
}

// ---------------------------------------------------------------- vector (2): WRITE_ONLY
// RDMA_WRITE_ONLY, 5 bytes payload "hello" + 3 bytes pad, from 192.168.1.10:0xc123 to
// 192.168.1.20:4791, IP id 0x1234, DF, TOS 0x02 (ECT(0)), TTL 64, real IP checksum 0xa504,
// UDP checksum 0. BTH: PadCnt 3, P_Key 0xffff, QP 0x12, AckReq, PSN 0xabcd. RETH: VA
// 0x00007f0012345678, R_Key 0xabcd, length 5. The ICRC was computed with Python's zlib over
// the masked bytes (LRH stand-in, TOS/TTL/IP checksum/UDP checksum/BTH byte 4 all 0xff):
//   python3 -c "import zlib;print(hex(zlib.crc32(bytes.fromhex('ffffffffffffffff 45ff0044 12344000 ff11ffff c0a8010a c0a80114 c12312b7 0030ffff 0a30ffff ff000012 8000abcd 00007f0012345678 0000abcd 00000005 68656c6c6f 000000'))))"
// which prints 0xbddac8d1.
constexpr uint32_t kWriteIcrc = 0xbddac8d1;
const char kWriteTransportHex[] = // BTH .. pad
    "0a 30 ffff 00 000012 80 00abcd"
    "00007f0012345678 0000abcd 00000005"
    "68656c6c6f 000000";
const char kWriteIpUdpHex[] = "45020044 12344000 4011a504 c0a8010a c0a80114 c12312b7 00300000";

IcrcIpv4Fields write_fields() {
    IcrcIpv4Fields f;
    f.src_ip = 0xc0a8010a;
    f.dst_ip = 0xc0a80114;
    f.src_port = 0xc123;
    f.dst_port = 4791;
    f.ip_id = 0x1234;
    f.frag = 0x4000;
    return f;
}

// Full IPv4 packet (no Ethernet) including the ICRC bytes.
std::vector<uint8_t> write_ip_packet() {
    auto p = from_hex(kWriteIpUdpHex);
    const auto t = from_hex(kWriteTransportHex);
    p.insert(p.end(), t.begin(), t.end());
    p.resize(p.size() + 4);
    store_icrc(p.data() + p.size() - 4, kWriteIcrc);
    return p;
}

TEST(IcrcWrite, PythonVectorViaFields) {
    const auto t = from_hex(kWriteTransportHex);
    ASSERT_EQ(t.size(), 36u);
    EXPECT_EQ(icrc_of_pieces(write_fields(), {{t.data(), t.size()}}), kWriteIcrc);
}

TEST(IcrcWrite, PythonVectorViaPacket) {
    const auto p = write_ip_packet();
    ASSERT_EQ(p.size(), 68u); // matches the IP total length 0x44 in the header
    uint32_t icrc = 0;
    ASSERT_TRUE(icrc_ipv4_packet(p.data(), p.size() - kIcrcLen, &icrc));
    EXPECT_EQ(icrc, kWriteIcrc);
    // Wire order is little-endian: d1 c8 da bd.
    EXPECT_EQ(std::vector<uint8_t>(p.end() - 4, p.end()), from_hex("d1c8dabd"));
}

TEST(IcrcWrite, ParsedPacketVerifies) {
    const auto p = write_ip_packet();
    PacketView v;
    ASSERT_EQ(parse_packet(p.data() + kIpLen + kUdpLen, p.size() - kIpLen - kUdpLen, &v), ParseError::kOk);
    EXPECT_EQ(v.payload_len, 5u);
    EXPECT_EQ(std::string(reinterpret_cast<const char *>(v.payload), v.payload_len), "hello");
    EXPECT_EQ(v.bth.pad_count, 3);
    EXPECT_EQ(v.reth.dma_len, 5u);
    EXPECT_EQ(v.transport_len, 36u);
    EXPECT_EQ(icrc_of_pieces(write_fields(), {{p.data() + kIpLen + kUdpLen, v.transport_len}}), v.icrc);
}

TEST(IcrcWrite, BeginThenCopyTheRestGivesTheVector) {
    // The receive path's split: headers by icrc_ipv4_begin, the payload by crc32_copy into
    // its place, the pad by crc32. Every split point from the BTH's end to the ICRC.
    const auto t = from_hex(kWriteTransportHex);
    for (size_t head = kBthLen; head <= t.size(); ++head) {
        uint8_t out[64] = {};
        uint32_t c = icrc_ipv4_begin(write_fields(), t.data(), head, t.size());
        const size_t body = t.size() - head, copied = body / 2;
        c = crc32_copy(c, out, t.data() + head, copied);
        c = crc32(c, t.data() + head + copied, body - copied);
        EXPECT_EQ(c, kWriteIcrc) << "head " << head;
        EXPECT_EQ(std::memcmp(out, t.data() + head, copied), 0) << "head " << head;
    }
}

TEST(IcrcWrite, PrefixCacheFollowsTheFieldsAndTheLength) {
    // Whatever changes between calls (length, an address, a port, the IP ID), the cached
    // prefix gives what icrc_ipv4_begin computes from scratch.
    const auto t = from_hex(kWriteTransportHex);
    IcrcPrefixCache cache;
    IcrcIpv4Fields f = write_fields();
    for (int step = 0; step < 12; ++step) {
        const size_t len = step % 3 == 2 ? t.size() - 4 : t.size();
        if (step % 4 == 1) f.src_ip ^= 0x100;
        if (step % 5 == 3) f.dst_port ^= 1;
        if (step == 7) f.ip_id = 9;
        EXPECT_EQ(cache.begin(f, t.data(), kBthLen, len), icrc_ipv4_begin(f, t.data(), kBthLen, len)) << "step " << step;
        EXPECT_EQ(cache.begin(f, t.data(), 20, len), icrc_ipv4_begin(f, t.data(), 20, len)) << "step " << step;
    }
}

// ---------------------------------------------------------------- (3) masking
// Offsets (in the IPv4 packet) REFERENCE.md says are masked: TOS, TTL, IP checksum, UDP
// checksum, BTH byte 4.
bool is_masked(size_t off) {
    return off == 1 || off == 8 || off == 10 || off == 11 || off == kIpLen + 6 || off == kIpLen + 7 ||
           off == kIpLen + kUdpLen + 4;
}

TEST(IcrcMasking, NamedFieldsDoNotMatter) {
    const auto base = write_ip_packet();
    const size_t len = base.size() - kIcrcLen;
    struct Change {
        const char *what;
        size_t off;
        uint8_t value;
    };
    const Change changes[] = {
        {"ECN CE", 1, 0x03},         {"DSCP 48 (CNP class)", 1, 0xc0}, {"DSCP 26 + ECT(0)", 1, 0x6a},
        {"TOS 0", 1, 0x00},          {"TTL 1", 8, 0x01},               {"TTL 255", 8, 0xff},
        {"IP checksum hi", 10, 0x00}, {"IP checksum lo", 11, 0x77},    {"UDP checksum hi", 26, 0x12},
        {"UDP checksum lo", 27, 0x34}, {"FECN", 32, 0x80},             {"BECN", 32, 0x40},
        {"FECN+BECN", 32, 0xc0},      {"BTH byte 4 reserved", 32, 0x3f},
    };
    for (const Change &c : changes) {
        auto p = base;
        p[c.off] = c.value;
        uint32_t icrc = 0;
        ASSERT_TRUE(icrc_ipv4_packet(p.data(), len, &icrc)) << c.what;
        EXPECT_EQ(icrc, kWriteIcrc) << c.what;
    }
    // All masked fields at once.
    auto p = base;
    p[1] = 0x03, p[8] = 7, p[10] = p[11] = 0, p[26] = p[27] = 0x55, p[32] = 0xc0;
    uint32_t icrc = 0;
    ASSERT_TRUE(icrc_ipv4_packet(p.data(), len, &icrc));
    EXPECT_EQ(icrc, kWriteIcrc);
}

TEST(IcrcMasking, EveryCoveredByteMatters) {
    // CRC-32 detects every error confined to one byte, so flipping any covered byte must
    // change the ICRC, and flipping a masked one must not. Covers PSN, QP, P_Key, RETH,
    // payload, pad, addresses, ports, IP id/flags and both length fields.
    const auto base = write_ip_packet();
    const size_t len = base.size() - kIcrcLen;
    for (size_t off = 0; off < len; ++off) {
        for (uint8_t x : {uint8_t(0x01), uint8_t(0x80), uint8_t(0xff)}) {
            auto p = base;
            p[off] ^= x;
            uint32_t icrc = 0;
            const bool ok = icrc_ipv4_packet(p.data(), len, &icrc);
            if (is_masked(off)) {
                ASSERT_TRUE(ok) << off;
                EXPECT_EQ(icrc, kWriteIcrc) << "masked offset " << off;
            } else if (off == 0 || off == 9) {
                // Version/IHL and protocol: the packet may stop being IPv4/UDP; if it is
                // still accepted the ICRC must differ.
                if (ok) {
                    EXPECT_NE(icrc, kWriteIcrc) << "offset " << off;
                }
            } else {
                ASSERT_TRUE(ok) << off;
                EXPECT_NE(icrc, kWriteIcrc) << "covered offset " << off << " xor " << int(x);
            }
        }
    }
}

TEST(IcrcMasking, FieldsApiCoversIpUdpFieldsAndIgnoresFecnBecn) {
    const auto t = from_hex(kWriteTransportHex);
    const IcrcIpv4Fields base = write_fields();
    // FECN/BECN live in the transport bytes and are masked there too.
    for (uint8_t b4 : {uint8_t(0x80), uint8_t(0x40), uint8_t(0xc0), uint8_t(0x3f)}) {
        auto m = t;
        m[4] = b4;
        EXPECT_EQ(icrc_of_pieces(base, {{m.data(), m.size()}}), kWriteIcrc) << int(b4);
    }
    // Every field of IcrcIpv4Fields is covered.
    std::vector<IcrcIpv4Fields> variants(6, base);
    variants[0].src_ip ^= 1;
    variants[1].dst_ip ^= 0x80000000;
    variants[2].src_port ^= 1;
    variants[3].dst_port = 4792;
    variants[4].ip_id ^= 0x100;
    variants[5].frag = 0;
    for (size_t i = 0; i < variants.size(); ++i)
        EXPECT_NE(icrc_of_pieces(variants[i], {{t.data(), t.size()}}), kWriteIcrc) << "field " << i;
    // transport_len drives both length fields: the same bytes claimed as a different
    // length must give a different ICRC.
    iovec one{const_cast<uint8_t *>(t.data()), t.size()};
    EXPECT_NE(icrc_ipv4(base, std::span<const iovec>(&one, 1), t.size() + 4), kWriteIcrc);
    // PSN (last BTH byte) and payload are covered.
    for (size_t off : {size_t(11), size_t(9), size_t(28), size_t(33)}) {
        auto m = t;
        m[off] ^= 1;
        EXPECT_NE(icrc_of_pieces(base, {{m.data(), m.size()}}), kWriteIcrc) << off;
    }
}

// ---------------------------------------------------------------- (4) piecewise
TEST(IcrcPieces, EveryTwoCutSplitEqualsOnePiece) {
    // Three pieces [0,i) [i,j) [j,n) for every i <= j, including empty pieces and cuts
    // inside the BTH (icrc.h promises only "the concatenation of pieces").
    const auto t = from_hex(kWriteTransportHex);
    const size_t n = t.size();
    const uint8_t *d = t.data();
    for (size_t i = 0; i <= n; ++i)
        for (size_t j = i; j <= n; ++j)
            ASSERT_EQ(icrc_of_pieces(write_fields(), {{d, i}, {d + i, j - i}, {d + j, n - j}}), kWriteIcrc)
                << "cuts " << i << "," << j;
}

TEST(IcrcPieces, OneByteIovecs) {
    const auto t = from_hex(kWriteTransportHex);
    std::vector<std::pair<const uint8_t *, size_t>> pieces;
    for (size_t i = 0; i < t.size(); ++i) pieces.push_back({t.data() + i, 1});
    EXPECT_EQ(icrc_of_pieces(write_fields(), pieces), kWriteIcrc);
}

TEST(IcrcPieces, HeaderPiecePlusPayloadPieceEqualsBuiltPacket) {
    // The way a sender gathers: headers in one buffer, payload (+pad) from user memory.
    // Checked against icrc_ipv4_packet over the equivalent full IPv4 packet built here,
    // for every pad value and an MTU-sized payload.
    for (size_t plen : {size_t(0), size_t(1), size_t(2), size_t(3), size_t(4), size_t(1023), size_t(4096)}) {
        test::PacketSpec s;
        s.opcode = kWriteOnly;
        s.qp = 0x345;
        s.psn = 0xffffff;
        s.ack_req = true;
        s.va = 0x1000;
        s.rkey = 0x77;
        s.dma_len = uint32_t(plen);
        for (size_t k = 0; k < plen; ++k) s.payload.push_back(uint8_t(k * 13 + 1));
        const auto pkt = test::build_packet(s);
        const size_t tlen = pkt.bytes.size() - kIcrcLen;

        test::Ipv4Spec ip;
        ip.tos = 0x6a;
        ip.id = 0xbeef;
        ip.ttl = 17;
        ip.src = 0x0a000001;
        ip.dst = 0x0a000002;
        ip.sport = 0xd00d;
        const auto full = test::build_ipv4(ip, pkt.bytes);
        uint32_t want = 0;
        ASSERT_TRUE(icrc_ipv4_packet(full.data(), full.size() - kIcrcLen, &want));

        IcrcIpv4Fields f;
        f.src_ip = ip.src;
        f.dst_ip = ip.dst;
        f.src_port = ip.sport;
        f.dst_port = ip.dport;
        f.ip_id = ip.id;
        f.frag = ip.frag;
        const uint8_t *d = pkt.bytes.data();
        EXPECT_EQ(icrc_of_pieces(f, {{d, tlen}}), want) << plen;
        EXPECT_EQ(icrc_of_pieces(f, {{d, pkt.hdr_len}, {d + pkt.hdr_len, tlen - pkt.hdr_len}}), want) << plen;
        // Header, payload, and pad as three pieces, the pad from a separate zero buffer.
        static const uint8_t zeros[3] = {};
        EXPECT_EQ(icrc_of_pieces(f, {{d, pkt.hdr_len}, {d + pkt.hdr_len, plen}, {zeros, pkt.pad}}), want) << plen;
    }
}

TEST(IcrcPacket, RejectsNonIpv4Udp) {
    auto p = write_ip_packet();
    const size_t len = p.size() - kIcrcLen;
    uint32_t icrc = 0;
    auto bad = p;
    bad[0] = 0x65; // IPv6 version nibble
    EXPECT_FALSE(icrc_ipv4_packet(bad.data(), len, &icrc));
    bad = p;
    bad[9] = 6; // TCP
    EXPECT_FALSE(icrc_ipv4_packet(bad.data(), len, &icrc));
    bad = p;
    bad[0] = 0x44; // IHL 16 bytes
    EXPECT_FALSE(icrc_ipv4_packet(bad.data(), len, &icrc));
    // Too short to hold IP + UDP + BTH.
    for (size_t l = 0; l < kIpLen + kUdpLen + kBthLen; ++l) EXPECT_FALSE(icrc_ipv4_packet(p.data(), l, &icrc)) << l;
    EXPECT_TRUE(icrc_ipv4_packet(p.data(), kIpLen + kUdpLen + kBthLen, &icrc));
}

} // namespace
} // namespace ibex::roce
