// The record of original values: one line per file ibexd has overwritten, holding what
// was there before ibexd first touched it. It is saved before the writes it covers, so a
// crash between the two never loses an original, and an entry is never replaced, so a
// restart does not mistake ibexd's own values for the originals.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>
#include "runtime/base/rootfs.h"

namespace ibex::tuning {


class StateFile {
public:
    explicit StateFile(std::string path) : path_(std::move(path)) {}

    const std::string &path() const { return path_; }
    // A missing file is an empty state. Returns 0 or an error code; err says what.
    int load(const RootFs &fs, std::string &err);
    int save(RootFs &fs) const; // removes the file when empty

    bool has(std::string_view file) const;
    void add(std::string file, std::string original); // no-op when already present
    void erase(std::string_view file);
    const std::vector<std::pair<std::string, std::string>> &entries() const { return entries_; }

    static std::string serialize(const std::vector<std::pair<std::string, std::string>> &entries);
    static bool deserialize(std::string_view text, std::vector<std::pair<std::string, std::string>> &out,
                            std::string &err);

private:
    std::string path_;
    std::vector<std::pair<std::string, std::string>> entries_; // in first-write order
};

} // namespace ibex::tuning
