// Opaque handles that survive misuse: every object NCCL holds (listen and data comms,
// memory registrations, requests, v11+ contexts) is a slot in a fixed table, and the handle NCCL gets
// is (generation, slot, kind) packed into a pointer-sized value, never an address. A
// handle whose object was closed, deregistered or completed has an old generation; one
// of another kind has the wrong kind byte; garbage points outside the table. All three
// are refused with an error code instead of being dereferenced.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace ibex_nccl {

enum class Kind : uint8_t { Listen = 1, SendComm = 2, RecvComm = 3, Memory = 4, Request = 5, Context = 6 };

template <typename T>
class HandleTable {
public:
    HandleTable(Kind kind, uint32_t capacity)
        : kind_(kind), objects_(capacity), generation_(capacity, 1), used_(capacity, false) {
        free_.reserve(capacity);
        for (uint32_t i = capacity; i-- > 0;)
            free_.push_back(i);
    }

    // A fresh object and its handle; {nullptr, nullptr} when the table is full.
    std::pair<void *, T *> add() {
        if (free_.empty())
            return {nullptr, nullptr};
        const uint32_t index = free_.back();
        free_.pop_back();
        used_[index] = true;
        objects_[index] = T{};
        return {encode(index), &objects_[index]};
    }

    // nullptr for a stale, foreign or malformed handle.
    T *get(const void *handle) {
        uint32_t index = 0;
        return decode(handle, &index) ? &objects_[index] : nullptr;
    }

    // Retires the handle (later lookups fail) and resets its object.
    void remove(const void *handle) {
        uint32_t index = 0;
        if (!decode(handle, &index))
            return;
        used_[index] = false;
        ++generation_[index];
        objects_[index] = T{};
        free_.push_back(index); // capacity reserved: no allocation
    }

    // Calls f(handle, object) for every live object.
    template <typename F>
    void for_each(F &&f) {
        for (uint32_t i = 0; i < objects_.size(); ++i)
            if (used_[i])
                f(encode(i), objects_[i]);
    }

private:
    void *encode(uint32_t index) const {
        const uint64_t value = (uint64_t{generation_[index]} << 32) | (uint64_t{index} << 8) |
                               static_cast<uint8_t>(kind_);
        return reinterpret_cast<void *>(static_cast<uintptr_t>(value));
    }

    bool decode(const void *handle, uint32_t *index) const {
        const auto value = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(handle));
        if ((value & 0xff) != static_cast<uint8_t>(kind_))
            return false;
        const uint64_t i = (value >> 8) & 0xffffff;
        if (i >= objects_.size() || !used_[i] || generation_[i] != (value >> 32))
            return false;
        *index = static_cast<uint32_t>(i);
        return true;
    }

    Kind kind_;
    std::vector<T> objects_;
    std::vector<uint32_t> generation_;
    std::vector<bool> used_;
    std::vector<uint32_t> free_;
};

} // namespace ibex_nccl
