// The GPU allocations of peers that this process has mapped (CUDA IPC), by peer and export
// id: each is opened once, on first use, and closed when the peer is forgotten (the shm
// provider: its last QP to that peer context goes; the collectives: the communicator
// closes), when trim() makes room, or with the cache. The opener is a parameter so the
// bookkeeping is tested without a GPU (tests/runtime/base/gpu_mappings_test.cpp).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <map>
#include <utility>

#include "runtime/base/cuda_memory.h"
#include "runtime/base/status.h"

namespace ibex::cuda {

class GpuMappings {
public:
    struct Opener {
        ibex_status_t (*open)(const IpcExport &, void **);
        void (*close)(void *);
    };

    explicit GpuMappings(Opener opener = {ipc_open, ipc_close}) : opener_(opener) {}
    GpuMappings(const GpuMappings &) = delete;
    GpuMappings &operator=(const GpuMappings &) = delete;
    ~GpuMappings() { clear(); }

    // [off, off + len) of export `id` of context `peer` as mapped here: opened from `e`
    // when not yet (e.size bounds it); nullptr with the opener's detail when it cannot be
    // mapped, or with a range error when the range leaves the allocation.
    ibex_status_t get(uint64_t peer, uint64_t id, const IpcExport &e, uint64_t off, uint64_t len, uint8_t **out) {
        auto it = maps_.find({peer, id});
        if (it == maps_.end()) {
            void *p = nullptr;
            if (ibex_status_t st = opener_.open(e, &p); st != IBEX_OK) return st;
            it = maps_.emplace(std::make_pair(peer, id), Mapping{static_cast<uint8_t *>(p), e.size}).first;
        }
        if (off > it->second.size || len > it->second.size - off) return range_error(off, len, it->second.size);
        *out = it->second.base + off;
        return IBEX_OK;
    }
    // Whether export `id` of `peer` is mapped here.
    bool has(uint64_t peer, uint64_t id) const { return maps_.count({peer, id}) != 0; }
    // Closes one mapping (nothing if it is not open).
    void forget(uint64_t peer, uint64_t id) {
        auto it = maps_.find({peer, id});
        if (it == maps_.end()) return;
        opener_.close(it->second.base);
        maps_.erase(it);
    }
    // Closes every mapping of one peer context.
    void forget_peer(uint64_t peer) {
        for (auto it = maps_.lower_bound({peer, 0}); it != maps_.end() && it->first.first == peer;) {
            opener_.close(it->second.base);
            it = maps_.erase(it);
        }
    }
    // Keeps at most `keep` mappings of one peer, closing its oldest (lowest ids) first but
    // never one of `in_use`: a peer's allocations come and go, and an open mapping holds
    // the peer's freed GPU memory.
    void trim(uint64_t peer, size_t keep, std::initializer_list<uint64_t> in_use) {
        size_t have = 0;
        for (auto it = maps_.lower_bound({peer, 0}); it != maps_.end() && it->first.first == peer; ++it) ++have;
        for (auto it = maps_.lower_bound({peer, 0}); have > keep && it != maps_.end() && it->first.first == peer;) {
            bool busy = false;
            for (uint64_t id : in_use) busy = busy || id == it->first.second;
            if (busy) {
                ++it;
                continue;
            }
            opener_.close(it->second.base);
            it = maps_.erase(it);
            --have;
        }
    }
    void clear() {
        for (auto &[key, m] : maps_) opener_.close(m.base);
        maps_.clear();
    }
    size_t size() const { return maps_.size(); }

private:
    struct Mapping {
        uint8_t *base;
        uint64_t size;
    };
    static ibex_status_t range_error(uint64_t off, uint64_t len, uint64_t size) {
        return fail(IBEX_ERR_INVALID_ARGUMENT, "[%llu, +%llu) leaves the peer's mapped GPU allocation of %llu bytes",
                    static_cast<unsigned long long>(off), static_cast<unsigned long long>(len),
                    static_cast<unsigned long long>(size));
    }

    Opener opener_;
    std::map<std::pair<uint64_t, uint64_t>, Mapping> maps_;
};

} // namespace ibex::cuda
