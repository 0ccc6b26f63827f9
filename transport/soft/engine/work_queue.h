// Work queue entries of the soft RC engine and the fixed-capacity ring that holds them.
// Entries are copied in at post time with their local buffers already resolved and
// checked, so the per-packet path never looks up an lkey.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <span>
#include <sys/uio.h>
#include <vector>

namespace ibex::soft {

inline constexpr int kMaxSge = 16;
inline constexpr uint32_t kMaxInline = 64;

struct LocalSge {
    uint8_t *addr;
    uint32_t len;
};

// Byte range [offset, offset + len) of a scatter/gather list.
struct SgeList {
    LocalSge sge[kMaxSge];
    uint16_t count = 0;
    uint32_t total = 0;

    // Appends iovecs describing the range; returns how many were appended.
    int gather(uint32_t offset, uint32_t len, iovec *out) const {
        int n = 0;
        for (uint16_t i = 0; i < count && len; ++i) {
            if (offset >= sge[i].len) {
                offset -= sge[i].len;
                continue;
            }
            uint32_t take = sge[i].len - offset;
            if (take > len) take = len;
            out[n++] = {sge[i].addr + offset, take};
            len -= take;
            offset = 0;
        }
        return n;
    }

    // Copies `len` bytes from src into the range starting at offset.
    void scatter(uint32_t offset, const uint8_t *src, uint32_t len) const {
        for (uint16_t i = 0; i < count && len; ++i) {
            if (offset >= sge[i].len) {
                offset -= sge[i].len;
                continue;
            }
            uint32_t take = sge[i].len - offset;
            if (take > len) take = len;
            std::memcpy(sge[i].addr + offset, src, take);
            src += take;
            len -= take;
            offset = 0;
        }
    }
};

struct SendWqe {
    uint64_t wr_id = 0;
    uint8_t opcode = 0; // ibex_wr_opcode_t
    bool signaled = false;
    bool solicited = false;
    bool fence = false;
    uint32_t imm = 0;
    SgeList local;
    uint64_t remote_addr = 0;
    uint32_t rkey = 0;
    uint64_t compare_add = 0;
    uint64_t swap = 0;
    uint32_t first_psn = 0;
    uint32_t npkts = 1; // PSNs this WQE occupies (READ: response packets)
    uint8_t inline_data[kMaxInline]; // IBEX_SEND_INLINE payload, copied at post time
};

struct RecvWqe {
    uint64_t wr_id = 0;
    SgeList local;
};

// Single-threaded ring indexed by ever-increasing 64-bit positions, so "how far along"
// comparisons never wrap. It holds `capacity` entries in a power-of-two array, so a
// position maps to its slot by a mask: a 64-bit division on every access was a visible
// share of a post's cost.
template <typename T>
class Ring {
public:
    explicit Ring(size_t capacity = 0) : cap_(capacity), slots_(std::bit_ceil(capacity ? capacity : 1)), mask_(slots_.size() - 1) {}
    size_t capacity() const { return cap_; }
    uint64_t head() const { return head_; }
    uint64_t tail() const { return tail_; }
    size_t size() const { return size_t(tail_ - head_); }
    bool empty() const { return head_ == tail_; }
    bool full() const { return size() == cap_; }
    T &at(uint64_t pos) { return slots_[pos & mask_]; }
    T &front() { return at(head_); }
    T &push() { return at(tail_++); }
    void pop() { ++head_; }

private:
    size_t cap_;
    std::vector<T> slots_;
    uint64_t mask_;
    uint64_t head_ = 0;
    uint64_t tail_ = 0;
};

} // namespace ibex::soft
