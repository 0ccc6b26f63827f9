// The 256-bit folding CRC-32 against ISA-L's (an independent implementation of the same
// CRC): every length through the short/wide boundaries, odd alignments, chained calls
// and non-zero starting values; plus zlib's published check value.
#include <cstdint>
#include <random>
#include <vector>

#include <gtest/gtest.h>
#include <isa-l/crc.h>

#include "transport/soft/codec/crc32_wide.h"
#include "transport/soft/codec/icrc.h"

namespace ibex::roce {
namespace {

TEST(Crc32Wide, CheckValue) {
    // CRC-32 of "123456789" is 0xcbf43926 (the catalogue check value of CRC-32/ISO-HDLC).
    const char *s = "123456789";
    EXPECT_EQ(crc32(0, s, 9), 0xcbf43926u);
    if (!crc32_wide_available()) GTEST_SKIP() << "this CPU has no AVX2 VPCLMULQDQ: ISA-L's kernel is used";
    EXPECT_EQ(crc32_wide(0, s, 9), 0xcbf43926u);
}

TEST(Crc32Wide, MatchesIsal) {
    if (!crc32_wide_available()) GTEST_SKIP() << "this CPU has no AVX2 VPCLMULQDQ: ISA-L's kernel is used";
    std::mt19937 rng(7);
    std::vector<uint8_t> buf(70000);
    for (auto &b : buf) b = static_cast<uint8_t>(rng());
    // Every length up to past two wide iterations, at every alignment mod 32.
    for (size_t len = 0; len <= 700; ++len) {
        const size_t off = len % 32;
        const uint32_t start = static_cast<uint32_t>(rng());
        ASSERT_EQ(crc32_wide(start, buf.data() + off, len), crc32_gzip_refl(start, buf.data() + off, len))
            << "len " << len << " off " << off;
    }
    for (int i = 0; i < 2000; ++i) {
        const size_t off = rng() % 64, len = rng() % 66000;
        const uint32_t start = static_cast<uint32_t>(rng());
        ASSERT_EQ(crc32_wide(start, buf.data() + off, len), crc32_gzip_refl(start, buf.data() + off, len))
            << "len " << len << " off " << off;
    }
    // Split anywhere, the chained value is the whole buffer's.
    const uint32_t whole = crc32_gzip_refl(0, buf.data(), 9000);
    for (size_t cut : {0u, 1u, 127u, 128u, 255u, 256u, 4095u, 4108u, 8999u, 9000u})
        EXPECT_EQ(crc32_wide(crc32_wide(0, buf.data(), cut), buf.data() + cut, 9000 - cut), whole) << "cut " << cut;
}

TEST(Crc32Wide, EveryBitCounts) {
    if (!crc32_wide_available()) GTEST_SKIP() << "this CPU has no AVX2 VPCLMULQDQ: ISA-L's kernel is used";
    std::vector<uint8_t> buf(4108, 0x5a);
    const uint32_t base = crc32_wide(0, buf.data(), buf.size());
    for (size_t i = 0; i < buf.size(); i += 97) {
        buf[i] ^= 0x10;
        EXPECT_NE(crc32_wide(0, buf.data(), buf.size()), base) << "byte " << i;
        buf[i] ^= 0x10;
    }
}

} // namespace
} // namespace ibex::roce
