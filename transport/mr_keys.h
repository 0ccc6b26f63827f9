// Memory-region keys as the software providers (soft, shm) hand them out: lkey == rkey ==
// slot index << 8 | generation, so a stale key of a deregistered region never names the
// region that reused its slot. Index 0 is never used: key 0 is never valid.
#pragma once

#include <cstdint>
#include <vector>

#include "transport/provider.h"

namespace ibex {

class MrKeys {
public:
    // The new key, or 0 when the table is full.
    uint32_t add(ibex_mr *mr) {
        uint32_t index;
        if (!free_.empty()) {
            index = free_.back();
            free_.pop_back();
        } else {
            if (slots_.size() >= (1u << 24)) return 0;
            index = static_cast<uint32_t>(slots_.size());
            slots_.emplace_back();
        }
        Slot &s = slots_[index];
        s.mr = mr;
        s.generation = static_cast<uint8_t>(s.generation + 1);
        if (s.generation == 0) s.generation = 1;
        return index << 8 | s.generation;
    }
    // False when the key named no region.
    bool remove(uint32_t key) {
        const uint32_t index = key >> 8;
        if (index == 0 || index >= slots_.size() || !slots_[index].mr) return false;
        slots_[index].mr = nullptr;
        free_.push_back(index);
        return true;
    }
    ibex_mr *find(uint32_t key) const {
        const uint32_t index = key >> 8;
        if (index >= slots_.size()) return nullptr;
        const Slot &s = slots_[index];
        return (s.mr && s.generation == (key & 0xff)) ? s.mr : nullptr;
    }

private:
    struct Slot {
        ibex_mr *mr = nullptr;
        uint8_t generation = 0;
    };
    std::vector<Slot> slots_ = std::vector<Slot>(1);
    std::vector<uint32_t> free_;
};

} // namespace ibex
