#include "transport/shm/segment.h"

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <mutex>
#include <unordered_map>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/base/log.h"
#include "runtime/base/status.h"

namespace ibex::shm {

std::string ctx_segment_name(uint32_t pid, uint32_t ctx_id) {
    return "/" + std::string(kSegmentPrefix) + std::to_string(pid) + "." + std::to_string(ctx_id);
}

std::string qp_segment_name(uint32_t pid, uint32_t ctx_id, uint32_t qpn, uint32_t generation) {
    return ctx_segment_name(pid, ctx_id) + "." + std::to_string(qpn) + "." + std::to_string(generation);
}

struct Segment::Mapping {
    void *addr;
    size_t bytes;
    pid_t creator; // a forked child inherits the table below, not the right to use it
    Mapping(void *a, size_t b) : addr(a), bytes(b), creator(getpid()) {}
    Mapping(const Mapping &) = delete;
    Mapping &operator=(const Mapping &) = delete;
    ~Mapping() { munmap(addr, bytes); }
};

namespace {

// The segments this process created and has not unlinked yet, by name. Only its own:
// a name another process created may be unlinked and made again (a reused pid), and
// shm_open then finds the new one, which a kept mapping would not be.
std::mutex g_created_mutex;
std::unordered_map<std::string, std::weak_ptr<Segment::Mapping>> g_created;

std::shared_ptr<Segment::Mapping> created_here(const std::string &name, size_t bytes) {
    std::lock_guard<std::mutex> l(g_created_mutex);
    auto it = g_created.find(name);
    if (it == g_created.end()) return nullptr;
    std::shared_ptr<Segment::Mapping> m = it->second.lock();
    if (!m || m->creator != getpid() || m->bytes < bytes) return nullptr;
    return m;
}

} // namespace

void *Segment::addr() const { return map_ ? map_->addr : nullptr; }

ibex_status_t Segment::create(const std::string &name, size_t bytes) {
    release();
    const int fd = shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) return fail_errno(IBEX_ERR_SYSTEM, errno, "shm_open(%s)", name.c_str());
    if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
        const int e = errno;
        ::close(fd);
        shm_unlink(name.c_str());
        return fail_errno(IBEX_ERR_SYSTEM, e, "ftruncate(%s, %zu)", name.c_str(), bytes);
    }
    void *p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    const int e = errno;
    ::close(fd);
    if (p == MAP_FAILED) {
        shm_unlink(name.c_str());
        return fail_errno(IBEX_ERR_SYSTEM, e, "mmap(%s)", name.c_str());
    }
    map_ = std::make_shared<Mapping>(p, bytes);
    name_ = name;
    owner_ = true;
    std::lock_guard<std::mutex> l(g_created_mutex);
    g_created[name] = map_;
    return IBEX_OK;
}

ibex_status_t Segment::open(const std::string &name, size_t bytes) {
    release();
    if (std::shared_ptr<Mapping> m = created_here(name, bytes)) {
        map_ = std::move(m);
        name_ = name;
        owner_ = false;
        return IBEX_OK;
    }
    const int fd = shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0);
    if (fd < 0)
        return fail_errno(errno == ENOENT ? IBEX_ERR_REMOTE : IBEX_ERR_SYSTEM, errno,
                          "peer segment %s (is the peer QP alive and on this host?)", name.c_str());
    struct stat st {};
    if (fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) < bytes) {
        ::close(fd);
        return fail(IBEX_ERR_REMOTE, "peer segment %s is %lld bytes, expected %zu", name.c_str(),
                    static_cast<long long>(st.st_size), bytes);
    }
    void *p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    const int e = errno;
    ::close(fd);
    if (p == MAP_FAILED) return fail_errno(IBEX_ERR_SYSTEM, e, "mmap(%s)", name.c_str());
    map_ = std::make_shared<Mapping>(p, bytes);
    name_ = name;
    owner_ = false;
    return IBEX_OK;
}

void Segment::release() {
    if (owner_ && !name_.empty()) {
        {
            // Unlinked: an open after this fails, as it would in another process. The
            // entry is this segment's (create is O_EXCL: one creator per linked name).
            std::lock_guard<std::mutex> l(g_created_mutex);
            g_created.erase(name_);
        }
        shm_unlink(name_.c_str());
    }
    map_.reset();
    name_.clear();
    owner_ = false;
}

bool process_alive(uint32_t pid) { return pid && (kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH); }

int reclaim_dead_segments() {
    DIR *d = opendir("/dev/shm");
    if (!d) return 0;
    int reclaimed = 0;
    const size_t plen = std::strlen(kSegmentPrefix);
    while (dirent *e = readdir(d)) {
        if (std::strncmp(e->d_name, kSegmentPrefix, plen) != 0) continue;
        char *end = nullptr;
        const unsigned long pid = std::strtoul(e->d_name + plen, &end, 10);
        if (!end || *end != '.' || pid == 0 || pid > 0x7fffffffUL || process_alive(static_cast<uint32_t>(pid))) continue;
        if (shm_unlink((std::string("/") + e->d_name).c_str()) == 0) ++reclaimed;
    }
    closedir(d);
    if (reclaimed) IBEX_LOG(info, "shm: reclaimed %d segment(s) of exited processes from /dev/shm", reclaimed);
    return reclaimed;
}

} // namespace ibex::shm
