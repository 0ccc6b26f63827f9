#include "transport/soft/engine/mr_table.h"

namespace ibex::soft {

uint32_t MrTable::add(ibex_mr *mr) {
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

void MrTable::remove(uint32_t key) {
    const uint32_t index = key >> 8;
    if (index == 0 || index >= slots_.size() || !slots_[index].mr) return;
    slots_[index].mr = nullptr;
    free_.push_back(index);
    ++epoch_;
}

} // namespace ibex::soft
