#include "runtime/base/rootfs.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace ibex {
namespace {

struct Fd {
    int fd = -1;
    explicit Fd(int f) : fd(f) {}
    ~Fd() {
        if (fd >= 0) ::close(fd);
    }
    Fd(const Fd &) = delete;
    Fd &operator=(const Fd &) = delete;
};

bool real_path(const std::string &p, std::string &out) {
    char buf[PATH_MAX];
    if (!::realpath(p.c_str(), buf)) return false;
    out = buf;
    return true;
}

int write_all(int fd, std::string_view data) {
    while (!data.empty()) {
        ssize_t n = ::write(fd, data.data(), data.size());
        if (n < 0) {
            if (errno == EINTR) continue;
            return errno;
        }
        data.remove_prefix(static_cast<size_t>(n));
    }
    return 0;
}

} // namespace

RootFs::RootFs(std::string_view root) {
    std::string r;
    struct stat st {};
    if (!real_path(std::string(root), r) || ::stat(r.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
        error_ = "root '" + std::string(root) + "' is not an existing directory";
        return;
    }
    root_ = r;
}

int RootFs::resolve(std::string_view path, std::string &real) const {
    if (!valid() || path.empty() || path.front() != '/') return kBadPath;
    // Reject ".." outright rather than normalising it: nothing ibexd needs contains one.
    for (size_t pos = 0; pos <= path.size();) {
        size_t next = path.find('/', pos);
        if (next == std::string_view::npos) next = path.size();
        if (path.substr(pos, next - pos) == "..") return kEscapesRoot;
        pos = next + 1;
    }
    std::string joined = root_ == "/" ? std::string(path) : root_ + std::string(path);
    while (joined.size() > 1 && joined.back() == '/') joined.pop_back();
    std::string resolved;
    if (!real_path(joined, resolved)) {
        if (errno != ENOENT) return errno;
        struct stat st {};
        if (::lstat(joined.c_str(), &st) == 0) return kEscapesRoot; // dangling symlink
        size_t slash = joined.rfind('/');
        std::string parent;
        if (!real_path(slash == 0 ? "/" : joined.substr(0, slash), parent)) return errno;
        resolved = (parent == "/" ? "" : parent) + joined.substr(slash);
    }
    if (root_ != "/" && resolved != root_ && !resolved.starts_with(root_ + "/")) return kEscapesRoot;
    real = std::move(resolved);
    return 0;
}

bool RootFs::exists(std::string_view path) const {
    std::string real;
    struct stat st {};
    return resolve(path, real) == 0 && ::stat(real.c_str(), &st) == 0;
}

bool RootFs::is_dir(std::string_view path) const {
    std::string real;
    struct stat st {};
    return resolve(path, real) == 0 && ::stat(real.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

int RootFs::read_file(std::string_view path, std::string &out) const {
    std::string real;
    if (int e = resolve(path, real)) return e;
    Fd f(::open(real.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
    if (f.fd < 0) return errno;
    out.clear();
    char buf[4096];
    for (;;) {
        ssize_t n = ::read(f.fd, buf, sizeof buf);
        if (n < 0) {
            if (errno == EINTR) continue;
            return errno;
        }
        if (n == 0) break;
        out.append(buf, static_cast<size_t>(n));
        if (out.size() > (1u << 24)) return EFBIG; // nothing ibexd reads is this large
    }
    while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
    return 0;
}

int RootFs::list_dir(std::string_view path, std::vector<std::string> &names) const {
    std::string real;
    if (int e = resolve(path, real)) return e;
    DIR *d = ::opendir(real.c_str());
    if (!d) return errno;
    names.clear();
    while (dirent *ent = ::readdir(d)) {
        std::string_view n = ent->d_name;
        if (n != "." && n != "..") names.emplace_back(n);
    }
    ::closedir(d);
    std::sort(names.begin(), names.end());
    return 0;
}

int RootFs::write_file(std::string_view path, std::string_view value) {
    std::string real;
    if (int e = resolve(path, real)) return e;
    // O_TRUNC matters only for fixture files; sysfs ignores it. No O_CREAT: an attribute
    // that does not exist is an error, not something to invent.
    Fd f(::open(real.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC | O_NOFOLLOW));
    if (f.fd < 0) return errno;
    std::string line(value);
    line += '\n';
    // sysfs reports a rejected value as the write's error, procfs sometimes at close.
    if (int e = write_all(f.fd, line)) return e;
    int fd = f.fd;
    f.fd = -1;
    if (::close(fd) != 0) return errno;
    return 0;
}

int RootFs::make_parents(std::string_view path) {
    for (size_t pos = 1; (pos = path.find('/', pos)) != std::string_view::npos; ++pos) {
        std::string real;
        if (int e = resolve(path.substr(0, pos), real)) return e;
        if (::mkdir(real.c_str(), 0755) != 0 && errno != EEXIST) return errno;
    }
    return 0;
}

int RootFs::replace_file(std::string_view path, std::string_view content) {
    if (int e = make_parents(path)) return e;
    std::string real;
    if (int e = resolve(path, real)) return e;
    std::string tmp = real + ".tmp." + std::to_string(::getpid());
    Fd f(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644));
    if (f.fd < 0) return errno;
    int e = write_all(f.fd, content);
    if (!e && ::fsync(f.fd) != 0) e = errno;
    // rename() replaces a symlink itself, never its target, so this cannot escape.
    if (!e && ::rename(tmp.c_str(), real.c_str()) != 0) e = errno;
    if (e) ::unlink(tmp.c_str());
    return e;
}

int RootFs::remove_file(std::string_view path) {
    std::string real;
    if (int e = resolve(path, real)) return e == ENOENT ? 0 : e;
    if (::unlink(real.c_str()) != 0 && errno != ENOENT) return errno;
    return 0;
}

std::string RootFs::describe(int err) {
    if (err == kEscapesRoot) return "path escapes the root (\"..\" or a symlink leading outside)";
    if (err == kBadPath) return "not an absolute path";
    char buf[128];
    const char *msg = strerror_r(err, buf, sizeof buf);
    return std::string(msg) + " (errno " + std::to_string(err) + ")";
}

} // namespace ibex
