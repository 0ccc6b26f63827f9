// Alltoall by pairwise exchange: for k = 1 .. n-1, rank r sends its block for (r + k) mod n
// and receives the block of (r - k) mod n. Every exchange is independent, so the executor
// runs them all at once as credits allow; the order only decides whose slices go first,
// and staggering it spreads the first slices over all receivers instead of every rank
// sending to rank 0 first. Blocks go straight into the receiver's recvbuf (recv_copy: the
// credit names the place), so nothing is staged or copied twice.
#include "allreduce/algorithms/algorithms.h"

namespace ibex::coll {

void build_pairwise_alltoall(const CollArgs &a, ScheduleBuilder &b) {
    const int n = a.nranks, r = a.rank;
    const size_t count = a.count;
    const auto block = [&](int p) { return static_cast<size_t>(p) * count; };
    b.local_copy(b.at(a.recvbuf, block(r)), b.at(a.sendbuf, block(r)), count);
    for (int k = 1; k < n; ++k) {
        const int to = (r + k) % n, from = (r - k + n) % n;
        b.send_run(to, b.at(a.sendbuf, block(to)), count);
        b.recv_copy_run(from, b.at(a.recvbuf, block(from)), count);
    }
}

} // namespace ibex::coll
