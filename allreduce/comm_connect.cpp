// QPs a communicator adds after its creation: to every rank at once (the first alltoall),
// or to one rank (the first send or receive between two ranks no collective connected).
// Either way with the stream idle and its drive lock held, so nothing runs on the executor
// while its channels change, and with the peer's receives posted before anything is sent.
#include <algorithm>
#include <string>
#include <vector>

#include "allreduce/comm.h"
#include "allreduce/stream_pass.h"
#include "runtime/base/config.h"
#include "runtime/base/log.h"
#include "runtime/base/status.h"

namespace ibex::coll {
namespace {

// Runs add(): waits for the queued operations, then holds the stream's drive lock as a
// waiting caller would (the progress thread stays off the executor). A failure puts the
// communicator in its error state on every rank, its detail prefixed with `what`.
template <typename Add>
ibex_status_t with_stream_held(ibex_comm *c, const std::string &what, Add add) {
    IBEX_TRY(comm_drain(c));
    c->waiters.fetch_add(1, std::memory_order_acq_rel);
    std::unique_lock dl(c->drive_mu);
    ibex_status_t st = add();
    if (st != IBEX_OK) {
        const std::string detail = what + ": " + ibex_last_error();
        enter_error(c, st, detail, true, nullptr);
        fail(st, "%s", detail.c_str());
    }
    dl.unlock();
    c->waiters.fetch_sub(1, std::memory_order_acq_rel);
    c->caller_turns.fetch_add(1, std::memory_order_acq_rel);
    return st;
}

// Channels to `more` (QPs in RESET, memory of their own); *first: the first new channel.
ibex_status_t add_channels(ibex_comm *c, const std::vector<int> &more, size_t *first) {
    const int links_before = c->exec.links();
    IBEX_TRY(c->exec.add_peers(more, first));
    for (int link = links_before; link < c->exec.links(); ++link)
        c->caches.add_domain(c->exec.pd(link), static_cast<size_t>(config::get_int("IBEX_COMM_REG_CACHE", 64, 4, 1 << 20)));
    return IBEX_OK;
}

void note_peers(ibex_comm *c, const std::vector<int> &more) {
    c->peers.insert(c->peers.end(), more.begin(), more.end());
    std::sort(c->peers.begin(), c->peers.end());
}

} // namespace

ibex_status_t comm_exchange_addresses(ibex_comm *c, const std::vector<int> &peers, std::vector<ibex_ep_addr_t> *remote) {
    const size_t n = static_cast<size_t>(c->nranks);
    const std::vector<ibex_ep_addr_t> mine = c->exec.local_addrs();
    std::vector<uint8_t> packed(n * IBEX_EP_ADDR_WIRE_LEN);
    for (size_t p = 0; p < n; ++p)
        ibex_ep_addr_pack(&mine[p], packed.data() + p * IBEX_EP_ADDR_WIRE_LEN, IBEX_EP_ADDR_WIRE_LEN);
    std::vector<uint8_t> table(packed.size() * n);
    IBEX_TRY(c->boot->allgather(packed.data(), packed.size(), table.data(), c->opt.timeout_ms));
    remote->assign(n, ibex_ep_addr_t{});
    for (int p : peers) {
        const uint8_t *row = table.data() + static_cast<size_t>(p) * packed.size();
        IBEX_TRY(ibex_ep_addr_unpack(row + static_cast<size_t>(c->rank) * IBEX_EP_ADDR_WIRE_LEN, IBEX_EP_ADDR_WIRE_LEN,
                                     &(*remote)[static_cast<size_t>(p)]));
    }
    return IBEX_OK;
}

ibex_status_t comm_connect_all(ibex_comm *c) {
    if (c->all_connected) return IBEX_OK;
    return with_stream_held(c, "connecting every pair of ranks", [&]() -> ibex_status_t {
        std::vector<int> more;
        for (int p = 0; p < c->nranks; ++p)
            if (p != c->rank && !c->exec.connected_to(p)) more.push_back(p);
        size_t first = 0;
        IBEX_TRY(add_channels(c, more, &first));
        std::vector<ibex_ep_addr_t> remote;
        IBEX_TRY(comm_exchange_addresses(c, more, &remote));
        IBEX_TRY(c->exec.connect(remote, c->opt.qp, first));
        // Nobody writes before every rank has its receives posted.
        IBEX_TRY(c->boot->barrier(c->opt.timeout_ms));
        IBEX_TRY(c->exec.announce(first));
        note_peers(c, more);
        c->all_connected = true;
        if (c->rank == 0)
            IBEX_LOG(info, "communicator of %d ranks: every pair connected (%zu more QPs on rank 0)", c->nranks,
                     more.size());
        return IBEX_OK;
    });
}

ibex_status_t comm_connect_pair(ibex_comm *c, int peer) {
    if (c->exec.connected_to(peer)) return IBEX_OK;
    return with_stream_held(c, "connecting to rank " + std::to_string(peer), [&]() -> ibex_status_t {
        size_t first = 0;
        IBEX_TRY(add_channels(c, {peer}, &first));
        uint8_t wire[IBEX_EP_ADDR_WIRE_LEN];
        const ibex_ep_addr_t mine = c->exec.local_addrs()[static_cast<size_t>(peer)];
        IBEX_TRY(ibex_ep_addr_pack(&mine, wire, sizeof wire));
        IBEX_TRY(c->boot->send_to(peer, wire, sizeof wire, c->opt.timeout_ms));
        std::vector<uint8_t> theirs;
        IBEX_TRY(c->boot->recv_from(peer, &theirs, c->opt.timeout_ms));
        std::vector<ibex_ep_addr_t> remote(static_cast<size_t>(c->nranks));
        IBEX_TRY(ibex_ep_addr_unpack(theirs.data(), theirs.size(), &remote[static_cast<size_t>(peer)]));
        IBEX_TRY(c->exec.connect(remote, c->opt.qp, first));
        // Neither writes before the other has its receives posted.
        const uint8_t ready = 1;
        IBEX_TRY(c->boot->send_to(peer, &ready, 1, c->opt.timeout_ms));
        IBEX_TRY(c->boot->recv_from(peer, &theirs, c->opt.timeout_ms));
        IBEX_TRY(c->exec.announce(first));
        note_peers(c, {peer});
        IBEX_LOG(debug, "communicator rank %d: connected to rank %d for a send or receive", c->rank, peer);
        return IBEX_OK;
    });
}

} // namespace ibex::coll
