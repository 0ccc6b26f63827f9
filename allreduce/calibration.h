// The cost model's constants for a new communicator, measured rather than assumed.
#pragma once

#include <ibex/coll.h>

namespace ibex::coll {

// Collective: measures alpha and beta with a probe op, gamma locally, and agrees on the
// medians through the bootstrap; then configures the communicator's selector. Needs the
// stream running (the probe is an op like any other).
ibex_status_t calibrate(ibex_comm *c);

} // namespace ibex::coll
