// Two shm endpoints of this process, connected, with the copy mechanism forced by
// IBEX_SHM_COPY while they connect (the choice is made at RTR), and what the contexts
// counted per mechanism.
#pragma once

#include <cstdlib>
#include <dirent.h>
#include <string>
#include <unistd.h>

#include "tests/support/endpoint.h"
#include "transport/shm/engine.h"

namespace ibex::test {

struct ShmPair {
    Endpoint a, b;
    // copy: "cma", "ring", "map" or nullptr (the provider chooses).
    void open(size_t bytes, const char *copy) {
        if (copy) setenv("IBEX_SHM_COPY", copy, 1);
        a.open(bytes, "shm");
        b.open(bytes, "shm");
        if (a.ok() && b.ok()) connect_pair(a, b);
        unsetenv("IBEX_SHM_COPY");
    }
};

// An ibex_mem_alloc region on pd, registered with `access`; both released at scope exit.
struct AllocRegion {
    ibex_pd_t *pd = nullptr;
    void *mem = nullptr;
    ibex_mr_t *mr = nullptr;
    AllocRegion(ibex_pd_t *p, size_t size, unsigned access) : pd(p) {
        EXPECT_EQ(ibex_mem_alloc(pd, size, &mem), IBEX_OK) << ibex_last_error();
        if (mem) {
            EXPECT_EQ(ibex_reg_mr(pd, mem, size, access, &mr), IBEX_OK) << ibex_last_error();
        }
    }
    ~AllocRegion() {
        if (mr) ibex_dereg_mr(mr);
        if (mem) ibex_mem_free(pd, mem);
    }
    AllocRegion(const AllocRegion &) = delete;
    AllocRegion &operator=(const AllocRegion &) = delete;
    bool ok() const { return mr != nullptr; }
    uint64_t at(size_t off) const { return reinterpret_cast<uintptr_t>(mem) + off; }
    uint8_t *bytes() const { return static_cast<uint8_t *>(mem); }
};

inline shm::CopyStats stats(Endpoint &e) {
    shm::CopyStats s;
    EXPECT_TRUE(shm::copy_stats(e.ctx, &s));
    return s;
}

// Names in /dev/shm that belong to `pid`'s shm contexts.
inline int segments_of(pid_t pid) {
    const std::string prefix = std::string(shm::kSegmentPrefix) + std::to_string(pid) + ".";
    int n = 0;
    if (DIR *d = opendir("/dev/shm")) {
        while (dirent *e = readdir(d)) n += std::string(e->d_name).rfind(prefix, 0) == 0;
        closedir(d);
    }
    return n;
}

} // namespace ibex::test
