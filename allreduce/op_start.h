// Turns a queued op into this rank's schedule (algorithm, buffers registered, scratch
// sized) and hands it to the communicator's executor.
#pragma once

#include <optional>
#include <string>

#include <ibex/coll.h>

#include "allreduce/algorithms/algorithms.h"
#include "allreduce/op.h"
#include "allreduce/schedule.h"

namespace ibex::coll {

// The way a collective runs here: through the fast boxes, the direct path (fast-box rounds
// over the peers' mapped memory), or a schedule on the executor. A reduce-scatter or
// allgather can fit both of the first two (the boxes count bytes per rank, the direct path
// the whole buffer), and every rank must choose alike whichever way its call reached the
// stream (the caller's own inline and small paths, or the progress thread), so all of them
// ask this.
enum class OpPath { boxes, direct, scheduled };
OpPath op_path(const ibex_comm *c, const Op &op);

// An op on OpPath::boxes (or a fast-box round of the direct paths) runs through these: sends
// and receives through the mailboxes (allreduce/mailbox.h), collectives through the fast
// boxes (allreduce/fastbox.h).
ibex_status_t boxes_start(ibex_comm *c, const Op &op);
ibex_status_t boxes_poll(ibex_comm *c, const Op &op, bool *done, bool *moved);
int boxes_waiting_on(const ibex_comm *c, const Op &op);
std::string boxes_stall_detail(const ibex_comm *c, const Op &op);

// The last op's schedule, kept for the next: a training loop issues the same collectives on
// the same buffers over and over, and choosing and building an 8-byte allreduce's schedule
// costs about as much as its engine work (0.3-0.4 us). Only what depends on nothing but
// the op's arguments and the communicator's settings is kept (no probe, no sumsrv).
struct ScheduleMemo {
    bool valid = false;
    OpKind kind = OpKind::allreduce;
    std::optional<Algo> forced;
    CollArgs args;
    Schedule schedule;

    bool matches(OpKind k, const std::optional<Algo> &f, const CollArgs &a) const {
        return valid && kind == k && forced == f && args == a;
    }
    // schedule holds what this call built.
    void keep(OpKind k, const std::optional<Algo> &f, const CollArgs &a) {
        valid = true;
        kind = k;
        forced = f;
        args = a;
    }
    // The cost model changed (calibration), or schedule is about to be rebuilt.
    void forget() { valid = false; }
};

// *empty: the op has nothing to move on this rank (it completes at once).
ibex_status_t start_op(ibex_comm *c, Op &op, bool *empty);

} // namespace ibex::coll
