// Endpoint addresses: binary pack/unpack and string round trips, exact formats, and
// malformed input of every kind.
#include <gtest/gtest.h>
#include <ibex/ibex.h>

#include <cstring>
#include <random>
#include <string>

namespace {

ibex_ep_addr_t v4(uint8_t a, uint8_t b, uint8_t c, uint8_t d, uint16_t port, uint32_t qpn, uint32_t psn, uint8_t mtu) {
    ibex_ep_addr_t e{};
    e.gid[10] = e.gid[11] = 0xff;
    e.gid[12] = a;
    e.gid[13] = b;
    e.gid[14] = c;
    e.gid[15] = d;
    e.udp_port = port;
    e.qpn = qpn;
    e.psn = psn;
    e.mtu = mtu;
    return e;
}

void expect_same(const ibex_ep_addr_t &x, const ibex_ep_addr_t &y) {
    EXPECT_EQ(0, std::memcmp(x.gid, y.gid, 16));
    EXPECT_EQ(x.udp_port, y.udp_port);
    EXPECT_EQ(x.qpn, y.qpn);
    EXPECT_EQ(x.psn, y.psn);
    EXPECT_EQ(x.mtu, y.mtu);
}

TEST(EpAddr, PackUnpackRoundTripsRandomAddresses) {
    std::mt19937_64 rng(5);
    for (int i = 0; i < 2000; ++i) {
        ibex_ep_addr_t a{};
        for (auto &g : a.gid) g = static_cast<uint8_t>(rng());
        a.udp_port = static_cast<uint16_t>(rng());
        a.mtu = static_cast<uint8_t>(1 + rng() % 5);
        a.flags = static_cast<uint8_t>(rng());
        a.qpn = static_cast<uint32_t>(rng()) & 0xffffff;
        a.psn = static_cast<uint32_t>(rng()) & 0xffffff;
        uint8_t wire[IBEX_EP_ADDR_WIRE_LEN];
        ASSERT_EQ(ibex_ep_addr_pack(&a, wire, sizeof wire), IBEX_OK);
        ibex_ep_addr_t b;
        std::memset(&b, 0xcc, sizeof b);
        ASSERT_EQ(ibex_ep_addr_unpack(wire, sizeof wire, &b), IBEX_OK) << ibex_last_error();
        expect_same(a, b);
        EXPECT_EQ(a.flags, b.flags);
    }
}

TEST(EpAddr, WireLayoutIsNetworkOrder) {
    ibex_ep_addr_t a = v4(10, 1, 2, 3, 4791, 0x123456, 0xabcdef, IBEX_MTU_4096);
    uint8_t wire[IBEX_EP_ADDR_WIRE_LEN + 4];
    std::memset(wire, 0xee, sizeof wire);
    ASSERT_EQ(ibex_ep_addr_pack(&a, wire, IBEX_EP_ADDR_WIRE_LEN), IBEX_OK);
    EXPECT_EQ(wire[0], 1) << "version";
    EXPECT_EQ(wire[1], IBEX_MTU_4096);
    EXPECT_EQ(wire[20], 4791 >> 8);
    EXPECT_EQ(wire[21], 4791 & 0xff);
    EXPECT_EQ(wire[22], 0x12);
    EXPECT_EQ(wire[24], 0x56);
    EXPECT_EQ(wire[25], 0xab);
    EXPECT_EQ(wire[27], 0xef);
    EXPECT_EQ(wire[28], 0xee) << "pack wrote past IBEX_EP_ADDR_WIRE_LEN";
    // Only 24 bits of QPN and PSN travel.
    a.qpn = 0xff123456;
    a.psn = 0x01abcdef;
    ibex_ep_addr_t b;
    ASSERT_EQ(ibex_ep_addr_pack(&a, wire, IBEX_EP_ADDR_WIRE_LEN), IBEX_OK);
    ASSERT_EQ(ibex_ep_addr_unpack(wire, IBEX_EP_ADDR_WIRE_LEN, &b), IBEX_OK);
    EXPECT_EQ(b.qpn, 0x123456u);
    EXPECT_EQ(b.psn, 0xabcdefu);
}

TEST(EpAddr, UnpackRejectsMalformedBuffers) {
    ibex_ep_addr_t a = v4(127, 0, 0, 9, 4791, 7, 9, IBEX_MTU_1024), b;
    uint8_t wire[IBEX_EP_ADDR_WIRE_LEN];
    ASSERT_EQ(ibex_ep_addr_pack(&a, wire, sizeof wire), IBEX_OK);
    EXPECT_EQ(ibex_ep_addr_pack(&a, wire, sizeof wire - 1), IBEX_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(ibex_ep_addr_pack(nullptr, wire, sizeof wire), IBEX_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(ibex_ep_addr_pack(&a, nullptr, sizeof wire), IBEX_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(ibex_ep_addr_unpack(wire, sizeof wire - 1, &b), IBEX_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(ibex_ep_addr_unpack(wire, 0, &b), IBEX_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(ibex_ep_addr_unpack(nullptr, sizeof wire, &b), IBEX_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(ibex_ep_addr_unpack(wire, sizeof wire, nullptr), IBEX_ERR_INVALID_ARGUMENT);
    uint8_t w2[IBEX_EP_ADDR_WIRE_LEN];
    for (uint8_t version : {0, 2, 255}) {
        std::memcpy(w2, wire, sizeof w2);
        w2[0] = version;
        EXPECT_EQ(ibex_ep_addr_unpack(w2, sizeof w2, &b), IBEX_ERR_INVALID_ARGUMENT) << "version " << int(version);
        EXPECT_NE(std::string(ibex_last_error()), "");
    }
    for (uint8_t mtu : {0, 6, 200}) {
        std::memcpy(w2, wire, sizeof w2);
        w2[1] = mtu;
        EXPECT_EQ(ibex_ep_addr_unpack(w2, sizeof w2, &b), IBEX_ERR_INVALID_ARGUMENT) << "mtu code " << int(mtu);
    }
    // Every truncation fails; nothing reads past the given length (ASan would tell).
    for (size_t n = 0; n < sizeof wire; ++n) EXPECT_EQ(ibex_ep_addr_unpack(wire, n, &b), IBEX_ERR_INVALID_ARGUMENT);
}

TEST(EpAddr, StringFormatAndRoundTrip) {
    ibex_ep_addr_t a = v4(127, 0, 0, 5, 4791, 0xabcd, 0x123456, IBEX_MTU_4096), b;
    char s[IBEX_EP_ADDR_STR_LEN];
    ASSERT_EQ(ibex_ep_addr_to_string(&a, s, sizeof s), IBEX_OK);
    EXPECT_STREQ(s, "ibex1:127.0.0.5:4791:00abcd:123456:4096");
    ASSERT_EQ(ibex_ep_addr_from_string(s, &b), IBEX_OK) << ibex_last_error();
    expect_same(a, b);
    for (uint8_t m = IBEX_MTU_256; m <= IBEX_MTU_4096; ++m) {
        a.mtu = m;
        ASSERT_EQ(ibex_ep_addr_to_string(&a, s, sizeof s), IBEX_OK);
        ASSERT_EQ(ibex_ep_addr_from_string(s, &b), IBEX_OK);
        EXPECT_EQ(b.mtu, m);
    }
    // IPv6 GIDs (colons inside the host part) round-trip too.
    ibex_ep_addr_t c{};
    const uint8_t gid[16] = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x02, 0x11, 0x22, 0xff, 0xfe, 0x33, 0x44, 0x55};
    std::memcpy(c.gid, gid, 16);
    c.udp_port = 65535;
    c.qpn = 0xffffff;
    c.psn = 0;
    c.mtu = IBEX_MTU_256;
    ASSERT_EQ(ibex_ep_addr_to_string(&c, s, sizeof s), IBEX_OK);
    EXPECT_STREQ(s, "ibex1:fe80::211:22ff:fe33:4455:65535:ffffff:000000:256");
    ASSERT_EQ(ibex_ep_addr_from_string(s, &b), IBEX_OK) << ibex_last_error();
    expect_same(c, b);
    // The longest possible string fits IBEX_EP_ADDR_STR_LEN.
    std::memset(c.gid, 0xab, 16);
    ASSERT_EQ(ibex_ep_addr_to_string(&c, s, sizeof s), IBEX_OK);
    EXPECT_LT(std::strlen(s), static_cast<size_t>(IBEX_EP_ADDR_STR_LEN));
}

TEST(EpAddr, ToStringRefusesSmallBuffers) {
    ibex_ep_addr_t a = v4(127, 0, 0, 5, 4791, 0xabcd, 0x123456, IBEX_MTU_4096);
    const std::string full = "ibex1:127.0.0.5:4791:00abcd:123456:4096";
    char s[64];
    ASSERT_EQ(ibex_ep_addr_to_string(&a, s, full.size() + 1), IBEX_OK); // exactly fits with NUL
    EXPECT_EQ(full, s);
    EXPECT_EQ(ibex_ep_addr_to_string(&a, s, full.size()), IBEX_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(ibex_ep_addr_to_string(&a, s, 5), IBEX_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(ibex_ep_addr_to_string(&a, nullptr, 64), IBEX_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(ibex_ep_addr_to_string(nullptr, s, 64), IBEX_ERR_INVALID_ARGUMENT);
}

TEST(EpAddr, FromStringRejectsMalformedInput) {
    const char *bad[] = {
        "",
        "ibex1:",
        "ibex1",
        "ibex2:127.0.0.1:4791:000001:000002:4096",
        "IBEX1:127.0.0.1:4791:000001:000002:4096",
        "ibex1:127.0.0.1:4791:000001:000002",          // missing MTU
        "ibex1:127.0.0.1:000001:000002:4096",          // missing port
        "ibex1::4791:000001:000002:4096",              // empty host
        "ibex1:127.0.0.256:4791:000001:000002:4096",   // not an address
        "ibex1:hostname:4791:000001:000002:4096",      // names are not resolved
        "ibex1:127.0.0.1:65536:000001:000002:4096",    // port out of range
        "ibex1:127.0.0.1:4791:1000000:000002:4096",    // QPN above 24 bits
        "ibex1:127.0.0.1:4791:000001:1000000:4096",    // PSN above 24 bits
        "ibex1:127.0.0.1:4791:00000g:000002:4096",     // not hex
        "ibex1:127.0.0.1:4791:000001:000002:1000",     // not an IB MTU
        "ibex1:127.0.0.1:4791:000001:000002:8192",
        "ibex1:127.0.0.1:4791:000001:000002:4096x",    // trailing garbage
        "ibex1:127.0.0.1:4791:000001:000002:4096 ",
        "ibex1:127.0.0.1:port:000001:000002:4096",
        " ibex1:127.0.0.1:4791:000001:000002:4096",
    };
    for (const char *s : bad) {
        ibex_ep_addr_t a;
        EXPECT_EQ(ibex_ep_addr_from_string(s, &a), IBEX_ERR_INVALID_ARGUMENT) << "accepted \"" << s << "\"";
        EXPECT_NE(std::string(ibex_last_error()), "") << s;
    }
    ibex_ep_addr_t a;
    EXPECT_EQ(ibex_ep_addr_from_string(nullptr, &a), IBEX_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(ibex_ep_addr_from_string("ibex1:127.0.0.1:4791:000001:000002:4096", nullptr), IBEX_ERR_INVALID_ARGUMENT);
    // A very long input is refused without overrunning anything.
    std::string huge = "ibex1:" + std::string(5000, '1') + ":4791:000001:000002:4096";
    EXPECT_EQ(ibex_ep_addr_from_string(huge.c_str(), &a), IBEX_ERR_INVALID_ARGUMENT);
}

} // namespace
