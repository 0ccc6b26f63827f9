#include "tools/ibexd/state_file.h"

#include "runtime/base/rootfs.h"

#include <algorithm>
#include <cerrno>

namespace ibex::tuning {
namespace {

constexpr std::string_view kHeader = "# ibexd state v1: <file>\\t<original value>; used by ibexd --restore";

std::string escape(std::string_view s) {
    std::string o;
    for (char c : s) {
        if (c == '\\') o += "\\\\";
        else if (c == '\t') o += "\\t";
        else if (c == '\n') o += "\\n";
        else o += c;
    }
    return o;
}

bool unescape(std::string_view s, std::string &o) {
    o.clear();
    for (size_t i = 0; i < s.size(); ++i) {
        if (s[i] != '\\') {
            o += s[i];
            continue;
        }
        if (++i == s.size()) return false;
        if (s[i] == '\\') o += '\\';
        else if (s[i] == 't') o += '\t';
        else if (s[i] == 'n') o += '\n';
        else return false;
    }
    return true;
}

} // namespace

std::string StateFile::serialize(const std::vector<std::pair<std::string, std::string>> &entries) {
    std::string s(kHeader);
    s += '\n';
    for (const auto &[f, v] : entries) s += escape(f) + '\t' + escape(v) + '\n';
    return s;
}

bool StateFile::deserialize(std::string_view text, std::vector<std::pair<std::string, std::string>> &out,
                            std::string &err) {
    out.clear();
    int line = 0;
    while (!text.empty()) {
        ++line;
        size_t nl = text.find('\n');
        std::string_view l = text.substr(0, nl);
        text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
        if (l.empty() || l.front() == '#') continue;
        size_t tab = l.find('\t');
        std::string f, v;
        if (tab == std::string_view::npos || !unescape(l.substr(0, tab), f) || !unescape(l.substr(tab + 1), v) ||
            f.empty() || f.front() != '/') {
            err = "line " + std::to_string(line) + " is malformed";
            return false;
        }
        out.emplace_back(std::move(f), std::move(v));
    }
    return true;
}

int StateFile::load(const RootFs &fs, std::string &err) {
    std::string text;
    int e = fs.read_file(path_, text);
    if (e == ENOENT) {
        entries_.clear();
        return 0;
    }
    if (e) {
        err = "cannot read state file " + path_ + ": " + RootFs::describe(e);
        return e;
    }
    std::vector<std::pair<std::string, std::string>> entries;
    if (!deserialize(text, entries, err)) {
        err = "state file " + path_ + ": " + err;
        return EINVAL;
    }
    entries_ = std::move(entries);
    return 0;
}

int StateFile::save(RootFs &fs) const {
    if (entries_.empty()) return fs.remove_file(path_);
    return fs.replace_file(path_, serialize(entries_));
}

bool StateFile::has(std::string_view file) const {
    return std::any_of(entries_.begin(), entries_.end(), [&](const auto &e) { return e.first == file; });
}

void StateFile::add(std::string file, std::string original) {
    if (!has(file)) entries_.emplace_back(std::move(file), std::move(original));
}

void StateFile::erase(std::string_view file) {
    std::erase_if(entries_, [&](const auto &e) { return e.first == file; });
}

} // namespace ibex::tuning
