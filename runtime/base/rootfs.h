// The only door through which ibexd touches files. Every path is given as the host sees
// it ("/proc/irq/45/smp_affinity_list") and is resolved under a root directory (/ in
// production, a fixture tree in tests). A path with a ".." component, or one that
// resolves (through symlinks) to somewhere outside the root, is refused, so a hostile or
// mistaken sysfs link or config value cannot make the daemon write elsewhere.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace ibex {

class RootFs {
public:
    // Negative "errno" values for refusals that are not OS errors.
    static constexpr int kEscapesRoot = -1;
    static constexpr int kBadPath = -2;

    explicit RootFs(std::string_view root);
    virtual ~RootFs() = default;
    RootFs(const RootFs &) = delete;
    RootFs &operator=(const RootFs &) = delete;

    bool valid() const { return !root_.empty(); }
    const std::string &error() const { return error_; }
    const std::string &root() const { return root_; } // canonical, no trailing slash but "/"

    // Resolves a host path to the real path under the root; 0 or an error code.
    // The final component need not exist, its parent must.
    int resolve(std::string_view path, std::string &real) const;

    bool exists(std::string_view path) const;
    bool is_dir(std::string_view path) const;
    // Reads a whole (small) file; trailing newline stripped.
    int read_file(std::string_view path, std::string &out) const;
    // Names in a directory, sorted, without "." and "..".
    int list_dir(std::string_view path, std::vector<std::string> &names) const;

    // Overwrites an existing file (sysfs/procfs attribute) with value + "\n". Never creates
    // it. Virtual so tests can make the "kernel" refuse a write with any errno.
    virtual int write_file(std::string_view path, std::string_view value);
    // Creates or atomically replaces a regular file (state and hint files), making
    // missing parent directories under the root.
    int replace_file(std::string_view path, std::string_view content);
    int remove_file(std::string_view path);

    static std::string describe(int err);

private:
    int make_parents(std::string_view path);

    std::string root_;
    std::string error_;
};

} // namespace ibex
