#include <unistd.h>

#include "runtime/base/log.h"
#include "transport/soft/engine/objects.h"

namespace ibex::soft {

void SoftCq::push(const ibex_wc_t &wc) {
    if (ring.full()) {
        // A CQ overrun is the application's sizing error; an RNIC raises a fatal async
        // event. Report it once and keep the oldest completions.
        if (overflows++ == 0) IBEX_LOG(error, "completion queue overrun (%zu entries): completions lost", ring.capacity());
        return;
    }
    ring.push() = wc;
    if (armed && event_fd >= 0) {
        armed = false;
        uint64_t one = 1;
        [[maybe_unused]] ssize_t r = write(event_fd, &one, sizeof one);
    }
}

} // namespace ibex::soft
