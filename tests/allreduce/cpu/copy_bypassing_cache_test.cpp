// The cache-bypassing copy moves every byte, whatever the alignment of either side and
// whatever the length around its thresholds (the 256-byte cut-over, 16-byte store
// alignment, 64-byte blocks), and touches nothing outside the destination range.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "allreduce/cpu/copy_bypassing_cache.h"

namespace {

TEST(CopyBypassingCache, EveryLengthAndAlignment) {
    constexpr size_t kPad = 64;
    std::vector<uint8_t> src(9000), dst(9000 + 2 * kPad);
    for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 131 + 7);
    for (size_t len : {size_t(0), size_t(1), size_t(15), size_t(255), size_t(256), size_t(257), size_t(319),
                       size_t(320), size_t(1000), size_t(4096), size_t(8191)}) {
        for (size_t src_off : {0, 1, 8, 15}) {
            for (size_t dst_off : {0, 3, 8, 16}) {
                SCOPED_TRACE(testing::Message() << "len " << len << " src+" << src_off << " dst+" << dst_off);
                std::fill(dst.begin(), dst.end(), uint8_t(0xee));
                uint8_t *d = dst.data() + kPad + dst_off;
                ibex::coll::copy_bypassing_cache(d, src.data() + src_off, len);
                size_t wrong = 0;
                for (size_t i = 0; i < len; ++i) wrong += d[i] != src[src_off + i];
                EXPECT_EQ(wrong, 0u);
                size_t outside = 0;
                for (size_t i = 0; i < dst.size(); ++i)
                    if (dst.data() + i < d || dst.data() + i >= d + len) outside += dst[i] != 0xee;
                EXPECT_EQ(outside, 0u) << "bytes outside the destination changed";
            }
        }
    }
}

} // namespace
