// Memory regions of one soft context, addressed by key (transport/mr_keys.h), with the
// lookup the engine does per request.
#pragma once

#include <cstdint>
#include <vector>

#include <ibex/ibex.h>

#include "transport/mr_keys.h"
#include "transport/provider.h"
#include "transport/soft/engine/objects.h"
#include "transport/soft/engine/staging.h"

namespace ibex::soft {

class MrTable {
public:
    // Returns the new key, or 0 when the table is full.
    uint32_t add(ibex_mr *mr) { return keys_.add(mr); }
    void remove(uint32_t key) {
        if (keys_.remove(key)) ++epoch_;
    }
    ibex_mr *find(uint32_t key) const { return keys_.find(key); }
    // Counts deregistrations: a pointer resolved earlier (a WRITE being placed, READ
    // responses being sent) is still good while this has not changed.
    uint64_t epoch() const { return epoch_; }
    // Resolves [addr, addr+len) inside the region of `key` with all of `access`.
    // Returns the host pointer, or nullptr on a bad key, range or missing right.
    uint8_t *resolve(uint32_t key, uint64_t addr, uint64_t len, unsigned access) const {
        ibex_mr *mr = find(key);
        if (!mr || (mr->access & access) != access) return nullptr;
        const uint64_t base = reinterpret_cast<uintptr_t>(mr->addr);
        if (addr < base || len > mr->length || addr - base > mr->length - len) return nullptr;
        // GPU memory: the engine works on its pinned shadow (engine/staging.h).
        if (auto *s = static_cast<SoftMr *>(mr); s->host) [[unlikely]]
            return staging::resolve(*s, addr, len, access);
        return reinterpret_cast<uint8_t *>(static_cast<uintptr_t>(addr));
    }

private:
    MrKeys keys_;
    uint64_t epoch_ = 0;
};

} // namespace ibex::soft
