#include "transport/completion_ring.h"

#include <poll.h>
#include <unistd.h>

#include "runtime/base/log.h"

namespace ibex {

void CompletionRing::signal() {
    armed = false;
    if (event_fd < 0) return;
    uint64_t one = 1;
    [[maybe_unused]] ssize_t r = write(event_fd, &one, sizeof one);
}

void CompletionRing::overrun() {
    if (overflows++ == 0) IBEX_LOG(error, "completion queue overrun (%zu entries): completions lost", ring.capacity());
}

void CompletionRing::arm() {
    armed = true;
    if (!ring.empty()) signal();
}

void CompletionRing::wait_event(int timeout_ms) const {
    pollfd p{event_fd, POLLIN, 0};
    if (poll(&p, 1, timeout_ms) > 0) {
        uint64_t v;
        [[maybe_unused]] ssize_t r = read(event_fd, &v, sizeof v);
    }
}

} // namespace ibex
