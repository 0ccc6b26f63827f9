// The switch's packet buffer, shared by its egress queues: each port keeps `reserve`
// bytes for itself and the rest is one pool that any port may fill. Without a reserve
// one congested port fills the whole buffer and the switch drops the ACKs and CNPs
// heading the other way, which cuts DCQCN's feedback exactly when it is needed.
// Pure accounting: the queues own their bytes; this tracks what they take of the pool.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ibex::cc {

class SharedBuffer {
public:
    SharedBuffer(uint64_t total_bytes, uint64_t reserve_bytes) : total_(total_bytes), reserve_(reserve_bytes) {}

    void add_port() { ++ports_; }
    uint64_t reserve() const { return reserve_; }
    // What is left for the pool once every port's reserve is set aside.
    uint64_t shared_size() const {
        const uint64_t reserved = reserve_ * ports_;
        return total_ > reserved ? total_ - reserved : 0;
    }
    // The most one queue can hold: its reserve and the whole pool.
    uint64_t port_limit() const { return shared_size() + reserve_; }
    uint64_t used() const { return used_; }
    uint64_t shared_used() const { return shared_used_; }

    // Whether a queue holding `queue_bytes` may take `bytes` more: what goes beyond its
    // reserve must fit in what is left of the pool.
    bool admits(uint64_t queue_bytes, uint64_t bytes) const {
        return shared_used_ + pool_share(queue_bytes, bytes) <= shared_size();
    }
    // A queue holding `queue_bytes` took `bytes` more / gave `bytes` back.
    void take(uint64_t queue_bytes, uint64_t bytes) {
        shared_used_ += pool_share(queue_bytes, bytes);
        used_ += bytes;
    }
    void give_back(uint64_t queue_bytes, uint64_t bytes) {
        shared_used_ -= pool_share(queue_bytes - bytes, bytes);
        used_ -= bytes;
    }

private:
    uint64_t beyond_reserve(uint64_t q) const { return q > reserve_ ? q - reserve_ : 0; }
    // Of `bytes` added to a queue holding `queue_bytes`, the part that lands in the pool.
    uint64_t pool_share(uint64_t queue_bytes, uint64_t bytes) const {
        return beyond_reserve(queue_bytes + bytes) - beyond_reserve(queue_bytes);
    }

    uint64_t total_;
    uint64_t reserve_;
    size_t ports_ = 0;
    uint64_t used_ = 0;
    uint64_t shared_used_ = 0; // sum over ports of what their queue holds beyond the reserve
};

} // namespace ibex::cc
