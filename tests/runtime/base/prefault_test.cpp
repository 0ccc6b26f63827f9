// Page-table warm-up: a range is resident afterwards and keeps its contents.
#include <gtest/gtest.h>

#include <sys/mman.h>

#include "runtime/base/prefault.h"
#include "tests/support/untouched_pages.h"

namespace {

using ibex::test::UntouchedPages;

constexpr size_t kPages = 64;

TEST(Prefault, MapsEveryPageAndKeepsTheContents) {
    UntouchedPages m(kPages);
    ASSERT_NE(m.p, MAP_FAILED);
    auto *b = static_cast<unsigned char *>(m.p);
    b[0] = 0x5a; // one page written before
    ASSERT_EQ(m.resident(), 1u);
    if (!ibex::base::prefault_range(b + 100, m.bytes - 200))
        GTEST_SKIP() << "MADV_POPULATE_WRITE is not supported by this kernel (Linux 5.14 or later)";
    EXPECT_EQ(m.resident(), kPages) << "the whole pages around the range, first and last included";
    EXPECT_EQ(b[0], 0x5a);
    EXPECT_EQ(b[m.bytes - 1], 0);
}

TEST(Prefault, RefusesWhatCannotBeWritten) {
    UntouchedPages m(kPages);
    ASSERT_NE(m.p, MAP_FAILED);
    ASSERT_EQ(mprotect(m.p, m.bytes, PROT_READ), 0);
    EXPECT_FALSE(ibex::base::prefault_range(m.p, m.bytes));
    EXPECT_TRUE(ibex::base::prefault_range(nullptr, 0)) << "nothing to map is no failure";
}

} // namespace
