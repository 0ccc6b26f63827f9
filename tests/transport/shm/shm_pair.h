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
