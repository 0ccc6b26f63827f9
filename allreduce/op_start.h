// Turns a queued op into this rank's schedule (algorithm, buffers registered, scratch
// sized) and hands it to the communicator's executor.
#pragma once

#include <ibex/coll.h>

#include "allreduce/op.h"

namespace ibex::coll {

// *empty: the op has nothing to move on this rank (it completes at once).
ibex_status_t start_op(ibex_comm *c, Op &op, bool *empty);

} // namespace ibex::coll
