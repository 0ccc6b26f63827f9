// The folding CRC-32 kernels (256- and 512-bit, with and without the fused copy) against
// ISA-L's (an independent implementation of the same CRC): every length through the
// short/wide boundaries, odd alignments, chained calls and non-zero starting values; plus
// zlib's published check value. Each width this CPU runs is tested; the others skip.
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <isa-l/crc.h>

#include "transport/soft/codec/crc32_wide.h"
#include "transport/soft/codec/icrc.h"

namespace ibex::roce {
namespace {

class Crc32Width : public ::testing::TestWithParam<unsigned> {
protected:
    void SetUp() override {
        if (GetParam() > crc32_wide_bits())
            GTEST_SKIP() << "this CPU folds at most " << crc32_wide_bits() << " bits at a time";
    }
    uint32_t crc(uint32_t start, const uint8_t *p, size_t len) const { return crc32_wide_at(GetParam(), start, p, len); }
    // The fused copy: checks that dst got exactly the bytes, and no byte around them.
    uint32_t copy(uint32_t start, const uint8_t *p, size_t len) {
        dst_.assign(len + 64, 0xee);
        const uint32_t c = crc32_copy_at(GetParam(), start, dst_.data() + 32 - len % 32, p, len);
        const uint8_t *d = dst_.data() + 32 - len % 32;
        EXPECT_EQ(std::memcmp(d, p, len), 0) << "len " << len;
        for (const uint8_t *q = dst_.data(); q < d; ++q) EXPECT_EQ(*q, 0xee) << "written before, len " << len;
        for (const uint8_t *q = d + len; q < dst_.data() + dst_.size(); ++q) EXPECT_EQ(*q, 0xee) << "written after, len " << len;
        return c;
    }
    std::vector<uint8_t> dst_;
};

std::vector<uint8_t> random_bytes(size_t n) {
    std::mt19937 rng(7);
    std::vector<uint8_t> buf(n);
    for (auto &b : buf) b = static_cast<uint8_t>(rng());
    return buf;
}

TEST(Crc32Wide, CheckValue) {
    // CRC-32 of "123456789" is 0xcbf43926 (the catalogue check value of CRC-32/ISO-HDLC).
    const char *s = "123456789";
    EXPECT_EQ(crc32(0, s, 9), 0xcbf43926u);
    char out[9];
    EXPECT_EQ(crc32_copy(0, out, s, 9), 0xcbf43926u);
    EXPECT_EQ(std::memcmp(out, s, 9), 0);
    if (!crc32_wide_available()) GTEST_SKIP() << "this CPU has no VPCLMULQDQ: ISA-L's kernel is used";
    EXPECT_EQ(crc32_wide(0, s, 9), 0xcbf43926u);
}

TEST_P(Crc32Width, MatchesIsal) {
    std::mt19937 rng(7);
    const std::vector<uint8_t> buf = random_bytes(70000);
    // Every length up to past two iterations of the widest loop, at every alignment mod 64.
    for (size_t len = 0; len <= 1100; ++len) {
        const size_t off = len % 64;
        const uint32_t start = static_cast<uint32_t>(rng());
        const uint32_t want = crc32_gzip_refl(start, buf.data() + off, len);
        ASSERT_EQ(crc(start, buf.data() + off, len), want) << "len " << len << " off " << off;
        ASSERT_EQ(copy(start, buf.data() + off, len), want) << "copy, len " << len << " off " << off;
    }
    for (int i = 0; i < 2000; ++i) {
        const size_t off = rng() % 64, len = rng() % 66000;
        const uint32_t start = static_cast<uint32_t>(rng());
        const uint32_t want = crc32_gzip_refl(start, buf.data() + off, len);
        ASSERT_EQ(crc(start, buf.data() + off, len), want) << "len " << len << " off " << off;
        ASSERT_EQ(copy(start, buf.data() + off, len), want) << "copy, len " << len << " off " << off;
    }
    // Split anywhere, the chained value is the whole buffer's.
    const uint32_t whole = crc32_gzip_refl(0, buf.data(), 9000);
    for (size_t cut : {0u, 1u, 127u, 128u, 255u, 256u, 511u, 512u, 4095u, 4108u, 8999u, 9000u}) {
        EXPECT_EQ(crc(crc(0, buf.data(), cut), buf.data() + cut, 9000 - cut), whole) << "cut " << cut;
        std::vector<uint8_t> out(9000);
        const uint32_t first = crc32_copy_at(GetParam(), 0, out.data(), buf.data(), cut);
        EXPECT_EQ(crc32_copy_at(GetParam(), first, out.data() + cut, buf.data() + cut, 9000 - cut), whole) << "cut " << cut;
        EXPECT_EQ(std::memcmp(out.data(), buf.data(), 9000), 0) << "cut " << cut;
    }
}

TEST_P(Crc32Width, EveryBitCounts) {
    std::vector<uint8_t> buf(4108, 0x5a), out(4108);
    const uint32_t base = crc(0, buf.data(), buf.size());
    for (size_t i = 0; i < buf.size(); i += 97) {
        buf[i] ^= 0x10;
        EXPECT_NE(crc(0, buf.data(), buf.size()), base) << "byte " << i;
        EXPECT_NE(crc32_copy_at(GetParam(), 0, out.data(), buf.data(), buf.size()), base) << "copy, byte " << i;
        buf[i] ^= 0x10;
    }
}

INSTANTIATE_TEST_SUITE_P(Widths, Crc32Width, ::testing::Values(0u, 256u, 512u),
                         [](const ::testing::TestParamInfo<unsigned> &i) { return "bits" + std::to_string(i.param); });

} // namespace
} // namespace ibex::roce
