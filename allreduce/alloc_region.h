// Memory that same-host peers map: an ibex_mem_alloc region registered on its PD (the
// fast boxes, the staged allreduce's staging). Freed, registration first, when it goes.
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
    ~AllocRegion() { close(); }

    // On failure it holds nothing and ibex_last_error() says why.
    ibex_status_t open(ibex_pd_t *pd, size_t bytes, unsigned access);
    void close();

    explicit operator bool() const { return mr_ != nullptr; }
    uint8_t *data() const { return static_cast<uint8_t *>(mem_); }
    size_t size() const { return bytes_; }
    uint32_t lkey() const { return mr_ ? ibex_mr_lkey(mr_) : 0; }
    uint32_t rkey() const { return mr_ ? ibex_mr_rkey(mr_) : 0; }

private:
    ibex_pd_t *pd_ = nullptr;
    void *mem_ = nullptr;
    ibex_mr_t *mr_ = nullptr;
    size_t bytes_ = 0;
};

} // namespace ibex::coll
