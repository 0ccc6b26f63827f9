// IPv4 -> MAC for the peers a dpdk port talks to: static entries (never replaced) and
// entries learned from ARP and from the source of RoCE frames. Lookups happen per packet,
// so the last hit is remembered; the table is small (the peers of one context).
#pragma once

#include <cstdint>
#include <vector>

#include "transport/soft/dpdk/frame.h"

namespace ibex::soft::dpdk {

class NeighbourTable {
public:
    void add_static(uint32_t ip, const Mac &mac) { put(ip, mac, true); }
    // Learns ip -> mac unless a static entry holds the address. Returns true if new or changed.
    bool learn(uint32_t ip, const Mac &mac) { return put(ip, mac, false); }
    // The MAC for ip, or nullptr when unresolved.
    const Mac *find(uint32_t ip) {
        if (last_ < entries_.size() && entries_[last_].ip == ip && entries_[last_].resolved) return &entries_[last_].mac;
        for (size_t i = 0; i < entries_.size(); ++i)
            if (entries_[i].ip == ip && entries_[i].resolved) {
                last_ = i;
                return &entries_[i].mac;
            }
        return nullptr;
    }
    // True if an ARP request for ip should go out now (at most one per interval per address).
    bool should_ask(uint32_t ip, uint64_t now_ns, uint64_t interval_ns) {
        Entry &e = entry(ip);
        if (e.resolved || (e.asked_ns && now_ns - e.asked_ns < interval_ns)) return false;
        e.asked_ns = now_ns;
        return true;
    }
    size_t size() const { return entries_.size(); }

private:
    struct Entry {
        uint32_t ip = 0;
        Mac mac;
        bool resolved = false;
        bool fixed = false;
        uint64_t asked_ns = 0;
    };
    Entry &entry(uint32_t ip) {
        for (auto &e : entries_)
            if (e.ip == ip) return e;
        entries_.push_back(Entry{ip});
        return entries_.back();
    }
    bool put(uint32_t ip, const Mac &mac, bool fixed) {
        Entry &e = entry(ip);
        if (e.fixed && !fixed) return false;
        const bool changed = !e.resolved || !(e.mac == mac);
        e.mac = mac;
        e.resolved = true;
        e.fixed = fixed;
        return changed;
    }
    std::vector<Entry> entries_;
    size_t last_ = 0;
};

} // namespace ibex::soft::dpdk
