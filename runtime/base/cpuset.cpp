#include "runtime/base/cpuset.h"

#include <algorithm>
#include <cstdio>

namespace ibex {
namespace {

int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

} // namespace

std::string_view trim(std::string_view s) {
    const char *ws = " \t\r\n";
    size_t b = s.find_first_not_of(ws);
    if (b == std::string_view::npos) return {};
    size_t e = s.find_last_not_of(ws);
    return s.substr(b, e - b + 1);
}

CpuSet::CpuSet(std::initializer_list<unsigned> cpus) {
    for (unsigned c : cpus) add(c);
}

void CpuSet::add(unsigned cpu) {
    auto it = std::lower_bound(cpus_.begin(), cpus_.end(), cpu);
    if (it == cpus_.end() || *it != cpu) cpus_.insert(it, cpu);
}

bool CpuSet::contains(unsigned cpu) const { return std::binary_search(cpus_.begin(), cpus_.end(), cpu); }

CpuSet CpuSet::minus(const CpuSet &other) const {
    CpuSet r;
    for (unsigned c : cpus_)
        if (!other.contains(c)) r.cpus_.push_back(c);
    return r;
}

bool CpuSet::parse_list(std::string_view text, CpuSet &out, std::string &err, unsigned limit) {
    CpuSet r;
    text = trim(text);
    while (!text.empty()) {
        size_t comma = text.find(',');
        std::string_view item = trim(text.substr(0, comma));
        text = comma == std::string_view::npos ? std::string_view{} : text.substr(comma + 1);
        if (item.empty() || (comma != std::string_view::npos && trim(text).empty())) {
            err = "empty element in CPU list";
            return false;
        }
        size_t dash = item.find('-');
        unsigned lo = 0, hi = 0;
        bool ok = dash == std::string_view::npos
                      ? parse_uint(item, lo) && (hi = lo, true)
                      : parse_uint(item.substr(0, dash), lo) && parse_uint(item.substr(dash + 1), hi);
        if (!ok) {
            err = "malformed CPU list element '" + std::string(item) + "' (expected N or N-M)";
            return false;
        }
        if (lo > hi) {
            err = "reversed range '" + std::string(item) + "'";
            return false;
        }
        if (hi >= limit) {
            err = "CPU " + std::to_string(hi) + " out of range (must be < " + std::to_string(limit) + ")";
            return false;
        }
        for (unsigned c = lo; c <= hi; ++c) r.add(c);
    }
    out = std::move(r);
    return true;
}

bool CpuSet::parse_mask(std::string_view text, CpuSet &out, std::string &err) {
    text = trim(text);
    if (text.empty()) {
        err = "empty CPU mask";
        return false;
    }
    std::vector<std::string_view> groups;
    while (true) {
        size_t comma = text.find(',');
        groups.push_back(text.substr(0, comma));
        if (comma == std::string_view::npos) break;
        text = text.substr(comma + 1);
    }
    if (groups.size() * 32 > kMaxCpus) {
        err = "CPU mask wider than " + std::to_string(kMaxCpus) + " CPUs";
        return false;
    }
    CpuSet r;
    unsigned base = 0;
    for (auto g = groups.rbegin(); g != groups.rend(); ++g, base += 32) {
        if (g->empty() || g->size() > 8) {
            err = "malformed CPU mask group '" + std::string(*g) + "' (expected 1-8 hex digits)";
            return false;
        }
        unsigned bit = 0;
        for (auto c = g->rbegin(); c != g->rend(); ++c, bit += 4) {
            int d = hex_digit(*c);
            if (d < 0) {
                err = "malformed CPU mask: '" + std::string(1, *c) + "' is not a hex digit";
                return false;
            }
            for (int b = 0; b < 4; ++b)
                if (d & (1 << b)) r.add(base + bit + static_cast<unsigned>(b));
        }
    }
    out = std::move(r);
    return true;
}

bool CpuSet::parse_any(std::string_view text, CpuSet &out, std::string &err) {
    text = trim(text);
    if (text.starts_with("0x") || text.starts_with("0X")) return parse_mask(text.substr(2), out, err);
    return parse_list(text, out, err);
}

std::string CpuSet::to_list() const {
    std::string s;
    for (size_t i = 0; i < cpus_.size();) {
        size_t j = i;
        while (j + 1 < cpus_.size() && cpus_[j + 1] == cpus_[j] + 1) ++j;
        if (!s.empty()) s += ',';
        s += std::to_string(cpus_[i]);
        if (j > i) s += '-' + std::to_string(cpus_[j]);
        i = j + 1;
    }
    return s;
}

std::string CpuSet::to_mask() const {
    if (cpus_.empty()) return "0";
    size_t ngroups = cpus_.back() / 32 + 1;
    std::vector<unsigned> words(ngroups, 0);
    for (unsigned c : cpus_) words[c / 32] |= 1u << (c % 32);
    std::string s;
    char buf[16];
    for (size_t i = ngroups; i-- > 0;) {
        // The leading group unpadded, the rest zero-padded, as the kernel's bitmap parser
        // reads it.
        std::snprintf(buf, sizeof buf, i + 1 == ngroups ? "%x" : ",%08x", words[i]);
        s += buf;
    }
    return s;
}

bool parse_uint(std::string_view s, unsigned &out) {
    if (s.empty() || s.size() > 9) return false;
    unsigned v = 0;
    for (char c : s) {
        if (c < '0' || c > '9') return false;
        v = v * 10 + static_cast<unsigned>(c - '0');
    }
    out = v;
    return true;
}

} // namespace ibex
