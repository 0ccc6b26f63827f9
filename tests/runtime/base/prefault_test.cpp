// Page-table warm-up: a range is resident afterwards and keeps its contents.
#include <gtest/gtest.h>

#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "runtime/base/prefault.h"

namespace {

constexpr size_t kPages = 64;

// Pages of [p, p + kPages pages) that are resident.
size_t resident_pages(void *p) {
    std::vector<unsigned char> v(kPages);
    if (mincore(p, kPages * static_cast<size_t>(sysconf(_SC_PAGESIZE)), v.data()) != 0) return 0;
    size_t n = 0;
    for (unsigned char c : v) n += c & 1;
    return n;
}

struct Fresh {
    size_t bytes = kPages * static_cast<size_t>(sysconf(_SC_PAGESIZE));
    void *p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ~Fresh() {
        if (p != MAP_FAILED) munmap(p, bytes);
    }
};

TEST(Prefault, MapsEveryPageAndKeepsTheContents) {
    Fresh m;
    ASSERT_NE(m.p, MAP_FAILED);
    auto *b = static_cast<unsigned char *>(m.p);
    b[0] = 0x5a; // one page written before
    ASSERT_EQ(resident_pages(m.p), 1u);
    if (!ibex::base::prefault_range(b + 100, m.bytes - 200))
        GTEST_SKIP() << "MADV_POPULATE_WRITE is not supported by this kernel (Linux 5.14 or later)";
    EXPECT_EQ(resident_pages(m.p), kPages) << "the whole pages around the range, first and last included";
    EXPECT_EQ(b[0], 0x5a);
    EXPECT_EQ(b[m.bytes - 1], 0);
}

TEST(Prefault, RefusesWhatCannotBeWritten) {
    Fresh m;
    ASSERT_NE(m.p, MAP_FAILED);
    ASSERT_EQ(mprotect(m.p, m.bytes, PROT_READ), 0);
    EXPECT_FALSE(ibex::base::prefault_range(m.p, m.bytes));
    EXPECT_TRUE(ibex::base::prefault_range(nullptr, 0)) << "nothing to map is no failure";
}

} // namespace
