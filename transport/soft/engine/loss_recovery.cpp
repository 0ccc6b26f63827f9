#include "transport/soft/engine/loss_recovery.h"

#include <algorithm>
#include <cstring>

#include "transport/soft/codec/roce.h"

namespace ibex::soft {

using roce::psn_add;
using roce::psn_diff;

bool parse_retransmit_mode(const char *s, RetransmitMode &out) {
    if (!s) return false;
    if (!std::strcmp(s, "gbn") || !std::strcmp(s, "go-back-n")) {
        out = RetransmitMode::kGoBackN;
        return true;
    }
    if (!std::strcmp(s, "selective") || !std::strcmp(s, "irn")) {
        out = RetransmitMode::kSelective;
        return true;
    }
    return false;
}

const char *retransmit_mode_name(RetransmitMode m) { return m == RetransmitMode::kSelective ? "selective" : "gbn"; }

// ---- OooWindow

void OooWindow::configure(uint32_t slots, uint32_t slot_bytes) {
    // A power of two divides the PSN space (2^24), so PSN & (slots - 1) never maps two
    // PSNs of one window to the same slot, not even across the PSN wrap.
    uint32_t n = 0;
    if (slots) {
        n = 1;
        while (n < slots) n <<= 1;
    }
    slot_bytes_ = n ? slot_bytes : 0;
    bytes_.assign(size_t(n) * slot_bytes_, 0);
    tags_.assign(n, 0);
    lens_.assign(n, 0);
    held_ = 0;
}

bool OooWindow::hold(uint32_t epsn, uint32_t distance, const uint8_t *data, uint32_t len) {
    if (distance == 0 || distance >= slots() || len == 0 || len > slot_bytes_) return false;
    const uint32_t psn = psn_add(epsn, distance);
    const uint32_t i = psn & (slots() - 1);
    if (lens_[i]) {
        if (tags_[i] == psn) return false; // a duplicate of a packet already held
        --held_;                           // a stale PSN (before epsn): replaced
    }
    std::memcpy(bytes_.data() + size_t(i) * slot_bytes_, data, len);
    tags_[i] = psn;
    lens_[i] = len;
    ++held_;
    return true;
}

const uint8_t *OooWindow::find(uint32_t psn, uint32_t &len) const {
    if (!held_) return nullptr;
    const uint32_t i = psn & (slots() - 1);
    if (!lens_[i] || tags_[i] != psn) return nullptr;
    len = lens_[i];
    return bytes_.data() + size_t(i) * slot_bytes_;
}

void OooWindow::release(uint32_t psn) {
    if (!held_) return;
    const uint32_t i = psn & (slots() - 1);
    if (lens_[i] && tags_[i] == psn) {
        lens_[i] = 0;
        --held_;
    }
}

void OooWindow::drop_before(uint32_t epsn) {
    if (!held_) return;
    for (uint32_t i = 0; i < slots(); ++i) {
        if (lens_[i] && psn_diff(tags_[i], epsn) < 0) {
            lens_[i] = 0;
            --held_;
        }
    }
}

bool OooWindow::first_after(uint32_t epsn, uint32_t &psn) const {
    if (!held_) return false;
    for (uint32_t d = 1; d < slots(); ++d) {
        const uint32_t p = psn_add(epsn, d);
        const uint32_t i = p & (slots() - 1);
        if (lens_[i] && tags_[i] == p) {
            psn = p;
            return true;
        }
    }
    return false;
}

void OooWindow::clear() {
    std::fill(lens_.begin(), lens_.end(), 0);
    held_ = 0;
}

// ---- RetransmitSet

bool RetransmitSet::add(uint32_t begin, uint32_t end) {
    // Ranges still waiting cover up to covered_end_: a NAK repeated before its range was
    // resent adds nothing. Once the set has drained, a NAK for the same hole again means
    // the resent packets were lost too (the responder repeats a NAK only then).
    if (count_ && covered_valid_ && psn_diff(begin, covered_end_) < 0) begin = covered_end_;
    if (psn_diff(end, begin) <= 0 || count_ == kRanges) return false;
    ranges_[(head_ + count_) % kRanges] = {begin, end};
    ++count_;
    if (!covered_valid_ || psn_diff(end, covered_end_) > 0) covered_end_ = end;
    covered_valid_ = true;
    return true;
}

void RetransmitSet::pop() {
    if (!count_) return;
    head_ = (head_ + 1) % kRanges;
    --count_;
}

bool RetransmitSet::acked(uint32_t una) {
    bool dropped = false;
    while (count_) {
        Range &r = ranges_[head_];
        if (psn_diff(r.end, una) <= 0) {
            pop();
            dropped = true;
            continue;
        }
        if (psn_diff(r.begin, una) < 0) r.begin = una;
        break;
    }
    return dropped;
}

void RetransmitSet::reset(uint32_t una) {
    head_ = count_ = 0;
    covered_end_ = una;
    covered_valid_ = false;
}

// ---- TailTimer

void TailTimer::update(uint64_t now, uint32_t inflight, bool progress, bool idle) {
    if (progress) backoff_ = 0;
    if (!rto_low_ns_ || inflight == 0 || (inflight > kTailPackets && !idle)) {
        deadline_ = 0;
        return;
    }
    // With more than N in flight the peer may still be working through them: RTO_low
    // per ack interval (kIdlePackets) outstanding, so a busy peer is not probed early.
    const uint64_t base = rto_low_ns_ * std::max<uint32_t>(1, inflight / kIdlePackets);
    if (progress || !deadline_) deadline_ = now + (base << backoff_);
}

bool TailTimer::fire(uint64_t now) {
    if (!deadline_ || now < deadline_) return false;
    backoff_ = std::min(backoff_ + 1, kMaxBackoff);
    deadline_ = now + (rto_low_ns_ << backoff_);
    return true;
}

} // namespace ibex::soft
