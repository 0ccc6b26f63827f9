// Alltoall by pairwise exchange: for k = 1 .. n-1, rank r sends its block for (r + k) mod n
// and receives the block of (r - k) mod n. Every exchange is independent, so the executor
// runs them all at once as credits allow; the order only decides whose slices go first,
// and staggering it spreads the first slices over all receivers instead of every rank
// sending to rank 0 first. Blocks go straight into the receiver's recvbuf (recv_copy: the
// credit names the place), so nothing is staged or copied twice.
#include "allreduce/algorithms/algorithms.h"

namespace ibex::coll {
namespace {

// send_block(p) / recv_block(q): {offset, count} in elements of rank p's block here.
template <typename SendBlock, typename RecvBlock>
void pairwise(const CollArgs &a, ScheduleBuilder &b, SendBlock send_block, RecvBlock recv_block) {
    const int n = a.nranks, r = a.rank;
    const auto [own_at, own_count] = send_block(r);
    b.local_copy(b.at(a.recvbuf, recv_block(r).first), b.at(a.sendbuf, own_at), own_count);
    for (int k = 1; k < n; ++k) {
        const int to = (r + k) % n, from = (r - k + n) % n;
        const auto [send_at, send_count] = send_block(to);
        const auto [recv_at, recv_count] = recv_block(from);
        // An empty block moves nothing on either side (a rank with nothing to send or
        // receive at all runs no schedule, so an empty transfer could never be matched).
        if (send_count) b.send_run(to, b.at(a.sendbuf, send_at), send_count);
        if (recv_count) b.recv_copy_run(from, b.at(a.recvbuf, recv_at), recv_count);
    }
}

} // namespace

void build_pairwise_alltoall(const CollArgs &a, ScheduleBuilder &b) {
    const auto block = [&](int p) { return std::pair{static_cast<size_t>(p) * a.count, a.count}; };
    pairwise(a, b, block, block);
}

void build_pairwise_alltoallv(const CollArgs &a, std::span<const size_t> sendcounts, std::span<const size_t> sdispls,
                              std::span<const size_t> recvcounts, std::span<const size_t> rdispls, ScheduleBuilder &b) {
    const auto at = [](std::span<const size_t> displs, std::span<const size_t> counts) {
        return [=](int p) { return std::pair{displs[static_cast<size_t>(p)], counts[static_cast<size_t>(p)]}; };
    };
    pairwise(a, b, at(sdispls, sendcounts), at(rdispls, recvcounts));
}

} // namespace ibex::coll
