// perftest's key record as it crosses the TCP connection: the exact bytes stock perftest
// writes and parses (so an ibex tool can face ib_write_bw), and rejection of garbage.
#include <gtest/gtest.h>

#include <cstring>

#include "tools/ibex_perftest/oob.h"

namespace ibex::perftest {
namespace {

KeyRecord sample() {
    KeyRecord k;
    k.lid = 0x12;
    k.out_reads = 16;
    k.qpn = 0xabcdef;
    k.psn = 0x123456;
    k.rkey = 0xdeadbeef;
    k.vaddr = 0x7f0012345000ull;
    k.srqn = 7;
    const uint8_t gid[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 168, 1, 20};
    std::memcpy(k.gid, gid, 16);
    return k;
}

TEST(KeyRecord, PlainFormIsPerftestsFiftyNineBytes) {
    const std::string wire = format_key(sample(), false);
    ASSERT_EQ(wire.size(), kKeyMsgSize);
    EXPECT_EQ(wire.back(), '\0');
    EXPECT_STREQ(wire.c_str(), "0012:0010:abcdef:123456:deadbeef:00007f0012345000:00000007");
}

TEST(KeyRecord, GidFormIsPerftestsHundredAndEightBytes) {
    const std::string wire = format_key(sample(), true);
    ASSERT_EQ(wire.size(), kKeyMsgSizeGid);
    EXPECT_EQ(wire.back(), '\0');
    EXPECT_STREQ(wire.c_str(), "0012:0010:abcdef:123456:deadbeef:00007f0012345000:"
                               "00:00:00:00:00:00:00:00:00:00:ff:ff:c0:a8:01:14:00000007:");
}

TEST(KeyRecord, RoundTripsBothForms) {
    for (bool gid : {false, true}) {
        const KeyRecord in = sample();
        const std::string wire = format_key(in, gid);
        KeyRecord out;
        ASSERT_TRUE(parse_key(wire.data(), wire.size(), gid, &out)) << wire;
        EXPECT_EQ(out.lid, in.lid);
        EXPECT_EQ(out.out_reads, in.out_reads);
        EXPECT_EQ(out.qpn, in.qpn);
        EXPECT_EQ(out.psn, in.psn);
        EXPECT_EQ(out.rkey, in.rkey);
        EXPECT_EQ(out.vaddr, in.vaddr);
        EXPECT_EQ(out.srqn, in.srqn);
        if (gid) {
            EXPECT_EQ(std::memcmp(out.gid, in.gid, 16), 0);
        }
    }
}

TEST(KeyRecord, ParsesAnUppercaseRecordAsPerftestsScanfWould) {
    const char wire[] = "0000:0010:0000A1:00B2C3:00001234:00007F0000001000:00000000";
    KeyRecord k;
    ASSERT_TRUE(parse_key(wire, sizeof wire, false, &k));
    EXPECT_EQ(k.qpn, 0xa1u);
    EXPECT_EQ(k.psn, 0xb2c3u);
    EXPECT_EQ(k.vaddr, 0x7f0000001000ull);
}

TEST(KeyRecord, RejectsMalformedRecords) {
    KeyRecord k;
    const char *bad[] = {
        "0012:0010:abcdef:123456:deadbeef:00007f0012345000",          // srqn missing
        "0012:0010:abcdefa:123456:deadbeef:00007f0012345000:00000007", // QPN too wide
        "0012:0010:abcdef:12345g:deadbeef:00007f0012345000:00000007",  // not hex
        "",
    };
    for (const char *b : bad) {
        char buf[kKeyMsgSize] = {};
        std::strncpy(buf, b, sizeof buf - 1);
        EXPECT_FALSE(parse_key(buf, sizeof buf, false, &k)) << b;
    }
    EXPECT_FALSE(parse_key("short", 6, true, &k));
}

} // namespace
} // namespace ibex::perftest
