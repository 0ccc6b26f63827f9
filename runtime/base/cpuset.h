// CPU sets in the two spellings the kernel uses: cpulists ("0-3,8") for
// smp_affinity_list and local_cpulist, and comma-grouped hex masks ("ff,00000000") for
// xps_cpus and rps_cpus. Parsing is strict because every value ibexd writes must be
// validated first: a typo must not silently become "all CPUs" or "none".
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace ibex {

// Larger than any NR_CPUS a distribution kernel ships; a bigger number is a typo.
inline constexpr unsigned kMaxCpus = 8192;

class CpuSet {
public:
    CpuSet() = default;
    CpuSet(std::initializer_list<unsigned> cpus);

    // "0-3,8,10-11"; surrounding whitespace and an empty list (no CPUs) are accepted.
    // Every id must be < limit. On failure err says what and where.
    static bool parse_list(std::string_view text, CpuSet &out, std::string &err, unsigned limit = kMaxCpus);
    // "ff", "1,00000000": comma-separated groups of 1-8 hex digits, least significant last.
    static bool parse_mask(std::string_view text, CpuSet &out, std::string &err);
    // A cpulist, or a mask when prefixed with 0x (config files accept both).
    static bool parse_any(std::string_view text, CpuSet &out, std::string &err);

    void add(unsigned cpu);
    bool contains(unsigned cpu) const;
    bool empty() const { return cpus_.empty(); }
    size_t size() const { return cpus_.size(); }
    const std::vector<unsigned> &cpus() const { return cpus_; }
    CpuSet minus(const CpuSet &other) const;

    std::string to_list() const; // "" for the empty set
    std::string to_mask() const; // "0" for the empty set

    bool operator==(const CpuSet &) const = default;

private:
    std::vector<unsigned> cpus_; // sorted, unique
};

std::string_view trim(std::string_view s);
// A plain decimal number of at most 9 digits (CPU, IRQ and queue indexes).
bool parse_uint(std::string_view s, unsigned &out);

} // namespace ibex
