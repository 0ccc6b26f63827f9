// PSN arithmetic modulo 2^24, the RNR timer table and path-MTU helpers, against
// REFERENCE.md section 1.
#include <cstdint>

#include <gtest/gtest.h>

#include "transport/soft/codec/roce.h"

namespace ibex::roce {
namespace {

TEST(Psn, AddWrapsAt24Bits) {
    EXPECT_EQ(psn_add(0, 1), 1u);
    EXPECT_EQ(psn_add(0xfffffe, 1), 0xffffffu);
    EXPECT_EQ(psn_add(0xffffff, 1), 0u);
    EXPECT_EQ(psn_add(0xffffff, 2), 1u);
    EXPECT_EQ(psn_add(0xfffff0, 0x20), 0x10u);
    EXPECT_EQ(psn_add(5, 0x1000000), 5u); // a whole turn is the identity
    EXPECT_EQ(psn_add(5, 0xffffff), 4u);  // adding 2^24 - 1 is subtracting one
    EXPECT_EQ(psn_add(0, 0xffffffffu), 0xffffffu);
}

TEST(Psn, DiffAcrossTheWrap) {
    EXPECT_EQ(psn_diff(0, 0), 0);
    EXPECT_EQ(psn_diff(1, 0), 1);
    EXPECT_EQ(psn_diff(0, 1), -1);
    // 0 comes one after 0xffffff.
    EXPECT_EQ(psn_diff(0, 0xffffff), 1);
    EXPECT_EQ(psn_diff(0xffffff, 0), -1);
    EXPECT_EQ(psn_diff(2, 0xfffffe), 4);
    EXPECT_EQ(psn_diff(0xfffffe, 2), -4);
    // Largest distances either way.
    EXPECT_EQ(psn_diff(0x7fffff, 0), 0x7fffff);
    EXPECT_EQ(psn_diff(0, 0x7fffff), -0x7fffff);
    EXPECT_EQ(psn_diff(0x7ffffe, 0xffffff), 0x7fffff);
    // Exactly half a turn apart is ambiguous; like Linux rxe's psn_compare it reads as
    // "before" (-2^23) in both directions, so the range is [-2^23, 2^23).
    EXPECT_EQ(psn_diff(0x800000, 0), -0x800000);
    EXPECT_EQ(psn_diff(0, 0x800000), -0x800000);
    EXPECT_EQ(psn_diff(0x800001, 0), -0x7fffff);
}

TEST(Psn, DiffInvertsAdd) {
    // psn_diff(psn_add(b, d), b) == d for every d in [-2^23, 2^23), around both wrap points.
    const uint32_t bases[] = {0, 1, 0x7fffff, 0x800000, 0xfffffe, 0xffffff};
    const int32_t deltas[] = {-0x800000, -0x7fffff, -129, -128, -1, 0, 1, 63, 64, 128, 0x7ffffe, 0x7fffff};
    for (uint32_t b : bases)
        for (int32_t d : deltas) {
            const uint32_t a = psn_add(b, uint32_t(d) & kPsnMask);
            EXPECT_LE(a, kPsnMask);
            EXPECT_EQ(psn_diff(a, b), d) << "base " << b << " delta " << d;
        }
}

TEST(Psn, DiffIgnoresBitsAbove24) {
    // Callers may hold PSNs in 32-bit counters that were never masked.
    EXPECT_EQ(psn_diff(0x01000001, 0xff000000), 1);
}

TEST(RnrTimer, TableMatchesReference) {
    // Copied from REFERENCE.md section 1, "RNR timer codes in µs".
    const uint32_t ref[32] = {655360, 10,    20,    30,     40,     60,     80,     120,
                              160,    240,   320,   480,    640,    960,    1280,   1920,
                              2560,   3840,  5120,  7680,   10240,  15360,  20480,  30720,
                              40960,  61440, 81920, 122880, 163840, 245760, 327680, 491520};
    for (uint8_t code = 0; code < 32; ++code) EXPECT_EQ(rnr_timer_us(code), ref[code]) << int(code);
}

TEST(RnrTimer, CodesAboveFiveBitsUseTheLowBits) {
    // The code travels in the AETH's low 5 bits; a caller passing the whole syndrome
    // (0x20 | code) must get the timer for `code`, never an out-of-range read.
    for (uint8_t code = 0; code < 32; ++code)
        EXPECT_EQ(rnr_timer_us(uint8_t(0x20 | code)), rnr_timer_us(code));
    EXPECT_EQ(rnr_timer_us(0xff), 491520u);
}

TEST(Mtu, BytesForEnum) {
    EXPECT_EQ(mtu_bytes(1), 256);
    EXPECT_EQ(mtu_bytes(2), 512);
    EXPECT_EQ(mtu_bytes(3), 1024);
    EXPECT_EQ(mtu_bytes(4), 2048);
    EXPECT_EQ(mtu_bytes(5), 4096);
    EXPECT_EQ(mtu_bytes(0), 0);
    EXPECT_EQ(mtu_bytes(6), 0);
    EXPECT_EQ(mtu_bytes(255), 0);
}

TEST(Mtu, EnumForNetdevLikeRxe) {
    // rxe: netdev MTU - 80, rounded down to an IB MTU.
    EXPECT_EQ(mtu_enum_for_netdev(1500), 3); // 1420 -> 1024
    EXPECT_EQ(mtu_enum_for_netdev(9000), 5); // 8920 -> 4096
    EXPECT_EQ(mtu_enum_for_netdev(3000), 4); // 2920 -> 2048
    EXPECT_EQ(mtu_enum_for_netdev(576), 1);  // 496 -> 256
    // Exact boundaries: MTU + 80 fits, one less does not.
    EXPECT_EQ(mtu_enum_for_netdev(256 + 80), 1);
    EXPECT_EQ(mtu_enum_for_netdev(256 + 79), 0); // nothing fits
    EXPECT_EQ(mtu_enum_for_netdev(512 + 80), 2);
    EXPECT_EQ(mtu_enum_for_netdev(512 + 79), 1);
    EXPECT_EQ(mtu_enum_for_netdev(1024 + 80), 3);
    EXPECT_EQ(mtu_enum_for_netdev(1024 + 79), 2);
    EXPECT_EQ(mtu_enum_for_netdev(2048 + 80), 4);
    EXPECT_EQ(mtu_enum_for_netdev(2048 + 79), 3);
    EXPECT_EQ(mtu_enum_for_netdev(4096 + 80), 5);
    EXPECT_EQ(mtu_enum_for_netdev(4096 + 79), 4);
    EXPECT_EQ(mtu_enum_for_netdev(65535), 5); // 4096 is the largest IB MTU
    EXPECT_EQ(mtu_enum_for_netdev(0), 0);
    EXPECT_EQ(mtu_enum_for_netdev(-1), 0);
}

} // namespace
} // namespace ibex::roce
