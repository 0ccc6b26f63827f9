#include "transport/soft/engine/fault_injector.h"

#include <chrono>
#include <cstring>
#include <unistd.h>

namespace ibex::soft {

void FaultInjector::configure(const ibex_fault_config_t &cfg) {
    cfg_ = cfg;
    active_ = cfg.loss > 0 || cfg.reorder > 0 || cfg.duplicate > 0 || cfg.corrupt > 0;
    uint64_t seed = cfg.seed;
    if (!seed)
        seed = static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) ^
               (uint64_t(getpid()) << 32);
    rng_.seed(seed);
}

TxPacket FaultInjector::copy_of(const TxPacket &p, Held &slot) {
    slot.bytes.resize(p.len);
    size_t off = 0;
    for (int i = 0; i < p.npieces; ++i) {
        std::memcpy(slot.bytes.data() + off, p.pieces[i].iov_base, p.pieces[i].iov_len);
        off += p.pieces[i].iov_len;
    }
    TxPacket c = p;
    c.npieces = 1;
    c.pieces[0] = {slot.bytes.data(), slot.bytes.size()};
    return c;
}

void FaultInjector::apply(std::span<const TxPacket> in, std::vector<TxPacket> &out) {
    scratch_next_ = 0;
    auto scratch = [&]() -> Held & {
        if (scratch_next_ == scratch_.size()) scratch_.emplace_back();
        return scratch_[scratch_next_++];
    };
    for (const TxPacket &p : in) {
        if (roll(cfg_.loss)) {
            ++injected_;
            continue;
        }
        TxPacket pkt = p;
        if (roll(cfg_.corrupt)) {
            ++injected_;
            Held &h = scratch();
            pkt = copy_of(p, h);
            // Flip one bit anywhere in the packet: the receiver's ICRC check must catch it.
            std::uniform_int_distribution<size_t> at(0, h.bytes.size() - 1);
            h.bytes[at(rng_)] ^= 0x10;
        }
        if (!have_held_ && roll(cfg_.reorder)) {
            ++injected_;
            held_.pkt = copy_of(pkt, held_);
            have_held_ = true;
            continue;
        }
        out.push_back(pkt);
        if (roll(cfg_.duplicate)) {
            ++injected_;
            out.push_back(pkt);
        }
        if (have_held_) {
            // Copied again: held_ may take another packet before `out` is sent.
            out.push_back(copy_of(held_.pkt, scratch()));
            have_held_ = false;
        }
    }
}

} // namespace ibex::soft
