// Whether a memif port may be polled, around its peer's departure. DPDK 22.11's memif
// unmaps a port's rings when the peer disconnects, without synchronising with rx/tx bursts
// on that port: a burst caught mid-way reads unmapped memory. So a closing ibex port first
// says "leaving" (frame.h) and waits until its peer answers "stopped"; the peer then
// leaves the port alone until the link has gone down and come up again (a new peer's
// connect maps the rings before it raises the link), or until the leaver's shared memory
// is seen unmapped (a new peer that connected faster than the link was read as down).
// Pure state, tested without a device.
#pragma once

#include <cstdint>

namespace ibex::soft::dpdk {

class LeaveGate {
public:
    // How long a peer that said it is leaving may stay connected before it is believed
    // to have changed its mind.
    static constexpr uint64_t kMaxQuietNs = 2'000'000'000;
    // How long a closing ibex port waits for its peer's "stopped" before it disconnects.
    static constexpr uint64_t kLeaverWaitNs = 200'000'000;
    // An answer that found no room in the ring is retried for half of that, so it never
    // goes out after the leaver has given up and disconnected.
    static constexpr uint64_t kAnswerRetryNs = kLeaverWaitNs / 2;

    bool open() const { return state_ == State::open; }
    // answered: whether the "stopped" answer went out; if not, answer_due() says when to retry.
    void peer_leaving(uint64_t now, bool answered = true) {
        state_ = State::until_down;
        deadline_ = now + kMaxQuietNs;
        answer_until_ = answered ? 0 : now + kAnswerRetryNs;
    }
    // True while an unsent answer may still be retried (the port is closed meanwhile).
    bool answer_due(uint64_t now) {
        if (answer_until_ && now > answer_until_) answer_until_ = 0;
        return answer_until_ != 0;
    }
    void answer_sent() { answer_until_ = 0; }
    // The leaving peer's connection is known to be torn down (its shared memory is gone)
    // although the link never read as down: a new peer connected in between. The next
    // reopens() with the link up opens.
    void peer_gone() {
        if (state_ == State::until_down) state_ = State::until_up;
    }
    // While closed: true once bursts are safe again, given the link as it is now. *stayed:
    // reopened because the peer never went.
    bool reopens(bool link_up, uint64_t now, bool *stayed) {
        *stayed = false;
        if (state_ == State::until_down) {
            if (!link_up) {
                state_ = State::until_up;
            } else if (now < deadline_) {
                return false;
            } else {
                *stayed = true;
                state_ = State::open;
                return true;
            }
        }
        if (state_ == State::until_up && !link_up) return false;
        state_ = State::open;
        return true;
    }

private:
    enum class State : uint8_t { open, until_down, until_up };
    State state_ = State::open;
    uint64_t deadline_ = 0;
    uint64_t answer_until_ = 0;
};

} // namespace ibex::soft::dpdk
