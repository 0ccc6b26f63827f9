// Sends and receives: no algorithm, only the batch's transfers, all at once as credits
// allow. The builder slices in bytes (elem_bytes 1), so both ends of a transfer cut it
// alike whatever types the two named, and a receive lands in the caller's buffer directly.
#include "allreduce/algorithms/algorithms.h"

namespace ibex::coll {

void build_p2p(std::span<const P2pPiece> pieces, int rank, ScheduleBuilder &b, ScheduleBuilder &small,
               size_t small_max) {
    size_t next_self_recv = 0;
    for (const P2pPiece &p : pieces) {
        if (p.peer != rank) {
            ScheduleBuilder &cut = p.bytes <= small_max ? small : b;
            if (p.send)
                cut.send_run(p.peer, p.buf, p.bytes);
            else
                cut.recv_copy_run(p.peer, p.buf, p.bytes);
            continue;
        }
        if (!p.send) continue; // taken by the send it pairs with
        while (next_self_recv < pieces.size() &&
               (pieces[next_self_recv].send || pieces[next_self_recv].peer != rank))
            ++next_self_recv;
        if (next_self_recv == pieces.size()) return; // refused before: every send to itself has its receive
        b.local_copy(pieces[next_self_recv++].buf, p.buf, p.bytes);
    }
}

} // namespace ibex::coll
