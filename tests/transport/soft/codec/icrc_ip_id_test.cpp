// IcrcIpIdShift: the ICRC of a packet with one IP ID turned into its ICRC with another,
// against a NIC's frame (the ConnectX-4 Lx CNP of REFERENCE.md section 2, IP ID 0x718c) and
// against icrc_ipv4 computed from scratch for many IDs and lengths; and find() recovering
// the ID a receiver could not see.
#include <cstdint>
#include <random>
#include <sys/uio.h>
#include <vector>

#include <gtest/gtest.h>

#include "transport/soft/codec/icrc.h"
#include "transport/soft/codec/icrc_ip_id.h"
#include "tests/transport/soft/codec/codec_test_util.h"

namespace ibex::roce {
namespace {

uint32_t icrc_with_id(std::vector<uint8_t> &transport, uint16_t id) {
    IcrcIpv4Fields f;
    f.src_ip = 0x0a4e1401;
    f.dst_ip = 0x0a4e1402;
    f.src_port = 4791;
    f.dst_port = 4791;
    f.ip_id = id;
    const iovec whole{transport.data(), transport.size()};
    return icrc_ipv4(f, std::span<const iovec>(&whole, 1), transport.size());
}

TEST(IcrcIpId, TurnsTheConnectX4CnpFromIdZeroIntoTheCapturedOne) {
    // The CNP's transport bytes (BTH + 16 zero bytes) as captured, ICRC 0x2a00fd82 with ID 0x718c.
    const auto bth = test::from_hex("81 00 ffff 40 000118 00 000000 00000000000000000000000000000000");
    IcrcIpv4Fields f;
    f.src_ip = 0x0a001101;
    f.dst_ip = 0x0a001201;
    f.src_port = 0;
    f.dst_port = 4791;
    f.ip_id = 0;
    const iovec whole{const_cast<uint8_t *>(bth.data()), bth.size()};
    const uint32_t with_zero = icrc_ipv4(f, std::span<const iovec>(&whole, 1), bth.size());
    EXPECT_NE(with_zero, 0x2a00fd82u);
    IcrcIpIdShift shift;
    EXPECT_EQ(with_zero ^ shift.delta(0x718c, bth.size()), 0x2a00fd82u);
}

TEST(IcrcIpId, MatchesARecomputedIcrcForEveryLengthAndManyIds) {
    std::mt19937 rng(7);
    IcrcIpIdShift shift;
    for (size_t len : {12u, 28u, 44u, 1068u, 1072u, 4124u, 8236u}) {
        std::vector<uint8_t> t(len);
        for (auto &b : t) b = uint8_t(rng());
        const uint32_t base = icrc_with_id(t, 0);
        for (uint16_t id : {1, 2, 3, 63, 64, 127, 0x1234, 0xffff}) {
            EXPECT_EQ(base ^ shift.delta(id, len), icrc_with_id(t, id)) << "length " << len << " id " << id;
            // From any ID to any other: only their XOR matters.
            EXPECT_EQ(icrc_with_id(t, 5) ^ shift.delta(uint16_t(5 ^ id), len), icrc_with_id(t, id));
        }
    }
}

TEST(IcrcIpId, FindRecoversTheSendersIdFromTheReceiversGuess) {
    std::vector<uint8_t> t(1068);
    for (size_t i = 0; i < t.size(); ++i) t[i] = uint8_t(i * 31);
    IcrcIpIdShift shift;
    for (uint16_t sent : {0, 1, 9, 40, 127}) {
        for (uint16_t guess : {0, 3, 100}) {
            const uint32_t diff = icrc_with_id(t, guess) ^ icrc_with_id(t, sent);
            EXPECT_EQ(shift.find(diff, t.size(), 128), uint16_t(sent ^ guess)) << "sent " << sent << " guessed " << guess;
        }
    }
    // An ID outside the range is not found, and neither is a corrupted byte.
    EXPECT_EQ(shift.find(icrc_with_id(t, 0) ^ icrc_with_id(t, 300), t.size(), 128), 0);
    const uint32_t good = icrc_with_id(t, 0);
    t[500] ^= 0x10;
    EXPECT_EQ(shift.find(good ^ icrc_with_id(t, 0), t.size(), 128), 0);
}

} // namespace
} // namespace ibex::roce
