// Every opcode ibex speaks, built byte by byte from REFERENCE.md (test::build_packet, not
// the codec's encoders) and parsed back with parse_packet: every field, the payload
// pointer/length, and pad handling.
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "transport/soft/codec/icrc.h"
#include "transport/soft/codec/packet.h"
#include "transport/soft/codec/roce.h"
#include "tests/transport/soft/codec/codec_test_util.h"

namespace ibex::roce {
namespace {

// Parses from a heap copy of exactly the packet's size so that ASan builds flag any read
// past the end.
ParseError parse_exact(const std::vector<uint8_t> &bytes, PacketView *v, std::unique_ptr<uint8_t[]> *keep) {
    keep->reset(new uint8_t[bytes.size()]);
    if (!bytes.empty()) std::memcpy(keep->get(), bytes.data(), bytes.size());
    return parse_packet(keep->get(), bytes.size(), v);
}

std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
    std::vector<uint8_t> p(n);
    for (size_t i = 0; i < n; ++i) p[i] = uint8_t(seed + i * 7);
    return p;
}

// Two field sets: all-ones boundaries and distinct mid-range values.
test::PacketSpec spec_for(uint8_t op, int variant, std::vector<uint8_t> payload) {
    test::PacketSpec s;
    s.opcode = op;
    s.payload = std::move(payload);
    if (variant == 0) {
        s.se = s.mig = s.fecn = s.becn = s.ack_req = true;
        s.pkey = 0xffff;
        s.qp = 0xffffff;
        s.psn = 0xffffff;
        s.va = ~0ull;
        s.rkey = ~0u;
        s.dma_len = ~0u;
        s.syndrome = 0x63;
        s.msn = 0xffffff;
        s.imm = ~0u;
        s.atomic_va = ~0ull;
        s.atomic_rkey = ~0u;
        s.swap_add = ~0ull;
        s.compare = ~0ull;
        s.orig = ~0ull;
        s.icrc = 0xffffffff;
    } else {
        s.se = variant == 2;
        s.ack_req = variant == 1;
        s.pkey = 0x8001;
        s.qp = 0x000118;
        s.psn = 0x123456;
        s.va = 0x00007f0012345678ull;
        s.rkey = 0xa1b2c3d4;
        s.dma_len = 0x00010000;
        s.syndrome = uint8_t(0x20 | 14);
        s.msn = 0x000042;
        s.imm = 0xcafef00d;
        s.atomic_va = 0x0000100000000008ull;
        s.atomic_rkey = 0x5566;
        s.swap_add = 0x1122334455667788ull;
        s.compare = 0x99aabbccddeeff00ull;
        s.orig = 0x0badc0ffee0ddf00ull;
        s.icrc = 0x11223344;
    }
    if (op == kCnp) { // REFERENCE.md: CNP has BECN set, PSN 0, P_Key 0xffff
        s.becn = true;
        s.psn = 0;
        s.pkey = 0xffff;
    }
    return s;
}

void check(const test::PacketSpec &s, const test::BuiltPacket &pkt, const uint8_t *base, const PacketView &v) {
    const auto ref = *test::reference_headers(s.opcode);
    EXPECT_EQ(v.bth.opcode, s.opcode);
    EXPECT_EQ(v.bth.solicited, s.se);
    EXPECT_EQ(v.bth.mig_req, s.mig);
    EXPECT_EQ(v.bth.pad_count, pkt.pad);
    EXPECT_EQ(v.bth.tver, 0);
    EXPECT_EQ(v.bth.pkey, s.pkey);
    EXPECT_EQ(v.bth.fecn, s.fecn);
    EXPECT_EQ(v.bth.becn, s.becn);
    EXPECT_EQ(v.bth.dest_qp, s.qp);
    EXPECT_EQ(v.bth.ack_req, s.ack_req);
    EXPECT_EQ(v.bth.psn, s.psn);
    EXPECT_EQ(v.flags, op_info(s.opcode).flags);
    if (ref.reth) {
        EXPECT_EQ(v.reth.va, s.va);
        EXPECT_EQ(v.reth.rkey, s.rkey);
        EXPECT_EQ(v.reth.dma_len, s.dma_len);
    }
    if (ref.aeth) {
        EXPECT_EQ(v.aeth.syndrome, s.syndrome);
        EXPECT_EQ(v.aeth.msn, s.msn);
    }
    if (ref.imm) {
        EXPECT_EQ(v.imm, s.imm);
    }
    if (ref.atomic_eth) {
        EXPECT_EQ(v.atomic.va, s.atomic_va);
        EXPECT_EQ(v.atomic.rkey, s.atomic_rkey);
        EXPECT_EQ(v.atomic.swap_add, s.swap_add);
        EXPECT_EQ(v.atomic.compare, s.compare);
    }
    if (ref.atomic_ack_eth) {
        EXPECT_EQ(v.atomic_orig, s.orig);
    }
    // Payload starts right after the last extension header.
    EXPECT_EQ(v.payload, base + pkt.hdr_len);
    if (ref.payload) {
        ASSERT_EQ(v.payload_len, s.payload.size());
        EXPECT_EQ(std::vector<uint8_t>(v.payload, v.payload + v.payload_len), s.payload);
        // Pad bytes sit between payload and ICRC and are not part of the payload.
        EXPECT_EQ(v.payload + v.payload_len + pkt.pad, base + pkt.bytes.size() - kIcrcLen);
    } else {
        EXPECT_EQ(v.payload_len, 0u);
    }
    EXPECT_EQ(v.transport_len, pkt.bytes.size() - kIcrcLen);
    EXPECT_EQ(v.icrc, s.icrc);
}

TEST(PacketRoundTrip, EveryOpcodeEveryPayloadLength) {
    // Payload lengths covering every pad value (0..3) plus MTU-sized ones.
    const size_t lengths[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 255, 256, 1023, 1024, 4095, 4096};
    int checked = 0;
    for (uint8_t op : test::reference_opcodes()) {
        const auto ref = *test::reference_headers(op);
        for (int variant = 0; variant < 3; ++variant) {
            for (size_t n : lengths) {
                if (!ref.payload && n != 0) continue;
                SCOPED_TRACE(std::string(op_info(op).name) + " variant " + std::to_string(variant) + " len " +
                             std::to_string(n));
                const auto s = spec_for(op, variant, pattern(n, uint8_t(op + n)));
                const auto pkt = test::build_packet(s);
                // Expected total from REFERENCE.md sizes, independently of the codec's.
                const size_t expect_total = 12 + test::reference_ext_len(ref) + (ref.cnp ? 16 : 0) + n + pkt.pad + 4;
                ASSERT_EQ(pkt.bytes.size(), expect_total);
                EXPECT_EQ((pkt.bytes.size()) % 4, 0u);
                PacketView v;
                std::unique_ptr<uint8_t[]> keep;
                ASSERT_EQ(parse_exact(pkt.bytes, &v, &keep), ParseError::kOk);
                check(s, pkt, keep.get(), v);
                ++checked;
            }
        }
    }
    EXPECT_GT(checked, 21 * 3);
}

TEST(PacketRoundTrip, CodecEncodersProduceTheSameBytes) {
    // The codec's own encoders, used the way a sender would, must produce the bytes the
    // REFERENCE.md-based builder produces.
    test::PacketSpec s = spec_for(kWriteOnlyImm, 1, {9, 8, 7, 6, 5});
    const auto pkt = test::build_packet(s);
    std::vector<uint8_t> out(pkt.bytes.size());
    Bth b;
    b.opcode = s.opcode;
    b.solicited = s.se;
    b.mig_req = s.mig;
    b.pad_count = pad_for(s.payload.size());
    b.pkey = s.pkey;
    b.fecn = s.fecn;
    b.becn = s.becn;
    b.dest_qp = s.qp;
    b.ack_req = s.ack_req;
    b.psn = s.psn;
    encode_bth(out.data(), b);
    encode_reth(out.data() + kBthLen, Reth{s.va, s.rkey, s.dma_len});
    put32(out.data() + kBthLen + kRethLen, s.imm);
    std::memcpy(out.data() + kBthLen + kRethLen + kImmLen, s.payload.data(), s.payload.size());
    const size_t end = kBthLen + kRethLen + kImmLen + s.payload.size() + b.pad_count;
    ASSERT_EQ(end + kIcrcLen, out.size());
    store_icrc(out.data() + end, s.icrc);
    EXPECT_EQ(out, pkt.bytes);
}

TEST(PacketRoundTrip, CnpReservedBytesAreNotPayload) {
    const auto pkt = test::build_packet(spec_for(kCnp, 1, {}));
    ASSERT_EQ(pkt.bytes.size(), 12u + 16u + 4u);
    PacketView v;
    std::unique_ptr<uint8_t[]> keep;
    ASSERT_EQ(parse_exact(pkt.bytes, &v, &keep), ParseError::kOk);
    EXPECT_TRUE(v.bth.becn);
    EXPECT_EQ(v.bth.dest_qp, 0x000118u);
    EXPECT_EQ(v.payload_len, 0u);
    EXPECT_EQ(v.transport_len, 28u);
}

TEST(PacketRoundTrip, ZeroLengthSendHasNoPad) {
    // A zero-byte SEND_ONLY is legal (RDMA allows empty messages) and has pad 0.
    const auto pkt = test::build_packet(spec_for(kSendOnly, 1, {}));
    ASSERT_EQ(pkt.bytes.size(), 16u);
    PacketView v;
    std::unique_ptr<uint8_t[]> keep;
    ASSERT_EQ(parse_exact(pkt.bytes, &v, &keep), ParseError::kOk);
    EXPECT_EQ(v.payload_len, 0u);
    EXPECT_EQ(v.payload, keep.get() + kBthLen);
}

TEST(PacketRoundTrip, PadForMatchesReference) {
    // Pad 0-3 to a 4-byte boundary.
    const uint8_t expect[] = {0, 3, 2, 1};
    for (size_t n = 0; n < 64; ++n) EXPECT_EQ(pad_for(n), expect[n % 4]) << n;
    EXPECT_EQ(pad_for(4097), 3);
}

} // namespace
} // namespace ibex::roce
