// Memory that same-host peers map: an ibex_mem_alloc region registered on its PD (the
// fast boxes, the staged allreduce's staging, the executor's staging slots and eager
// rings). On the shm device a peer's WRITE into it is one memcpy into its mapping; on
// other devices it is ordinary page-aligned memory. Freed, registration first, when it
// goes.
//
// The shm device hands every allocation to every same-host peer, so memory meant for one
// peer each (the executor's per-channel slots and rings) is one allocation carved into
// RegisteredSlices, each its own registration (its own rkey and bounds): a rank then
// shares a few allocations with each peer rather than a few per pair of peers.
#pragma once

#include <cstddef>
#include <cstdint>

#include <ibex/ibex.h>

namespace ibex::coll {

class AllocRegion {
public:
    AllocRegion() = default;
    AllocRegion(const AllocRegion &) = delete;
    AllocRegion &operator=(const AllocRegion &) = delete;
    AllocRegion(AllocRegion &&o) noexcept : pd_(o.pd_), mem_(o.mem_), mr_(o.mr_), bytes_(o.bytes_), private_(o.private_) {
        o.mem_ = nullptr;
        o.mr_ = nullptr;
        o.bytes_ = 0;
    }
    AllocRegion &operator=(AllocRegion &&) = delete;
    ~AllocRegion() { close(); }

    // On failure it holds nothing and ibex_last_error() says why (naming the buffer `what`
    // where one is given). peers_map = false: memory only this process touches (a source
    // of sends), page-aligned but not an ibex_mem_alloc region, so the shm device does not
    // hand it to every peer. access 0: the memory alone, registered later in slices.
    ibex_status_t open(ibex_pd_t *pd, size_t bytes, unsigned access, const char *what = nullptr, bool peers_map = true);
    // open() for peers to map, every byte zero (boxes whose words peers poll); data() or
    // nullptr with ibex_last_error() saying why.
    uint8_t *open_zeroed(ibex_pd_t *pd, size_t bytes, unsigned access, const char *what);
    void close();

    explicit operator bool() const { return mem_ != nullptr; }
    uint8_t *data() const { return static_cast<uint8_t *>(mem_); }
    size_t size() const { return bytes_; }
    ibex_mr_t *mr() const { return mr_; }
    uint32_t lkey() const { return mr_ ? ibex_mr_lkey(mr_) : 0; }
    uint32_t rkey() const { return mr_ ? ibex_mr_rkey(mr_) : 0; }

private:
    ibex_pd_t *pd_ = nullptr;
    void *mem_ = nullptr;
    ibex_mr_t *mr_ = nullptr;
    size_t bytes_ = 0;
    bool private_ = false; // aligned_alloc'd, not ibex_mem_alloc'd
};

// [base, base + bytes) of memory that something else owns (an AllocRegion opened with
// access 0), registered on its own; deregistered when it goes, before its owner frees it.
class RegisteredSlice {
public:
    RegisteredSlice() = default;
    RegisteredSlice(const RegisteredSlice &) = delete;
    RegisteredSlice &operator=(const RegisteredSlice &) = delete;
    RegisteredSlice(RegisteredSlice &&o) noexcept : data_(o.data_), mr_(o.mr_), bytes_(o.bytes_) {
        o.data_ = nullptr;
        o.mr_ = nullptr;
        o.bytes_ = 0;
    }
    RegisteredSlice &operator=(RegisteredSlice &&) = delete;
    ~RegisteredSlice() { close(); }

    ibex_status_t open(ibex_pd_t *pd, uint8_t *base, size_t bytes, unsigned access, const char *what);
    void close();

    explicit operator bool() const { return mr_ != nullptr; }
    uint8_t *data() const { return data_; }
    size_t size() const { return bytes_; }
    ibex_mr_t *mr() const { return mr_; }

private:
    uint8_t *data_ = nullptr;
    ibex_mr_t *mr_ = nullptr;
    size_t bytes_ = 0;
};

} // namespace ibex::coll
