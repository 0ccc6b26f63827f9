// Turns a queued op into this rank's schedule (algorithm, buffers registered, scratch
// sized) and hands it to the communicator's executor.
#pragma once

#include <ibex/coll.h>

#include "allreduce/op.h"

namespace ibex::coll {

// The way a collective runs here: through the fast boxes, the direct path (fast-box rounds
// over the peers' mapped memory), or a schedule on the executor. A reduce-scatter or
// allgather can fit both of the first two (the boxes count bytes per rank, the direct path
// the whole buffer), and every rank must choose alike whichever way its call reached the
// stream (the caller's own inline and small paths, or the progress thread), so all of them
// ask this.
enum class OpPath { boxes, direct, scheduled };
OpPath op_path(const ibex_comm *c, const Op &op);

// *empty: the op has nothing to move on this rank (it completes at once).
ibex_status_t start_op(ibex_comm *c, Op &op, bool *empty);

} // namespace ibex::coll
