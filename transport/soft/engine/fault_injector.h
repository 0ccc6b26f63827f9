// Deterministic (seeded) fault injection on a soft context's transmit path: loss,
// reordering, duplication and corruption, for tests of the reliability layer.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include <ibex/ibex.h>

#include "transport/soft/port.h"

namespace ibex::soft {

class FaultInjector {
public:
    void configure(const ibex_fault_config_t &cfg);
    bool active() const { return active_; }
    uint64_t injected() const { return injected_; }

    // Applies faults to `in`, appending what should go on the wire to `out`. Packets that
    // are reordered or corrupted are copied into storage owned here.
    void apply(std::span<const TxPacket> in, std::vector<TxPacket> &out);

private:
    struct Held {
        std::vector<uint8_t> bytes;
        TxPacket pkt;
    };
    TxPacket copy_of(const TxPacket &p, Held &slot);
    bool roll(double p) { return p > 0 && dist_(rng_) < p; }

    bool active_ = false;
    ibex_fault_config_t cfg_{};
    std::mt19937_64 rng_;
    std::uniform_real_distribution<double> dist_{0.0, 1.0};
    uint64_t injected_ = 0;
    Held held_;            // a packet held back for reordering
    bool have_held_ = false;
    std::vector<Held> scratch_ = std::vector<Held>(64);
    size_t scratch_next_ = 0;
};

} // namespace ibex::soft
