// Named POSIX shared-memory segments of the shm provider, and reclaiming those a crashed
// process left behind. Names carry the owner's pid ("/ibex-shm.<pid>.<ctx>" for a
// context, "/ibex-shm.<pid>.<ctx>.<qpn>.<generation>" for a QP incarnation), so the next
// process that opens the provider can tell a dead owner's segments from live ones.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include <ibex/ibex.h>

namespace ibex::shm {

inline constexpr const char *kSegmentPrefix = "ibex-shm.";

std::string ctx_segment_name(uint32_t pid, uint32_t ctx_id);
std::string qp_segment_name(uint32_t pid, uint32_t ctx_id, uint32_t qpn, uint32_t generation);

class Segment {
public:
    Segment() = default;
    Segment(const Segment &) = delete;
    Segment &operator=(const Segment &) = delete;
    ~Segment() { release(); }

    // Creates (exclusively) and maps a zeroed segment of `bytes`; the creator unlinks it.
    ibex_status_t create(const std::string &name, size_t bytes);
    // Maps a peer's segment, which must be at least `bytes` long. A segment this process
    // created is not mapped a second time: the opener shares the creator's mapping, so
    // one process sees one address for it (two ends of a pair in one process; and
    // ThreadSanitizer matches a ring's release and acquire only at one address).
    ibex_status_t open(const std::string &name, size_t bytes);
    // Drops this end's use of the mapping (unmapped with the last one), and unlinks the
    // name when this process created it.
    void release();

    void *addr() const;
    bool mapped() const { return map_ != nullptr; }

    struct Mapping; // one mmap of a segment, unmapped when its last user lets go

private:
    std::shared_ptr<Mapping> map_;
    std::string name_;
    bool owner_ = false;
};

// Unlinks every "ibex-shm.<pid>..." segment whose pid no longer runs; returns how many.
int reclaim_dead_segments();
// True while `pid` names a running process.
bool process_alive(uint32_t pid);

} // namespace ibex::shm
