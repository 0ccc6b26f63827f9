// Anonymous memory no one has touched yet, and how many of its pages are resident: for
// tests of what maps pages ahead (registration, prefault).
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <vector>

namespace ibex::test {

struct UntouchedPages {
    explicit UntouchedPages(size_t n) : pages(n) {}
    ~UntouchedPages() {
        if (p != MAP_FAILED) munmap(p, bytes);
    }
    UntouchedPages(const UntouchedPages &) = delete;
    UntouchedPages &operator=(const UntouchedPages &) = delete;

    // How many of the pages are resident now (mincore).
    size_t resident() const {
        std::vector<unsigned char> v(pages);
        if (p == MAP_FAILED || mincore(p, bytes, v.data()) != 0) return 0;
        size_t n = 0;
        for (unsigned char c : v) n += c & 1;
        return n;
    }

    size_t pages;
    size_t bytes = pages * static_cast<size_t>(sysconf(_SC_PAGESIZE));
    void *p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
};

} // namespace ibex::test
