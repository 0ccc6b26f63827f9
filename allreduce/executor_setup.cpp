// Bringing the executor up: its links (context, PD, CQ per device), one RC channel per
// peer with its receive and eager buffers, the eager ring's announcement, and the
// connection. Running schedules over the channels is executor.cpp's.
#include <cstdlib>
#include <cstring>

#include "allreduce/executor.h"
#include "allreduce/executor_queues.h"
#include "runtime/base/status.h"

namespace ibex::coll {

Executor::~Executor() {
    for (Channel &c : chans_) {
        if (c.qp) ibex_destroy_qp(c.qp);
        if (c.rx_mr) ibex_dereg_mr(c.rx_mr);
    }
    chans_.clear(); // registered buffers go before the PD
    for (Link &l : links_) {
        l.staging.close();
        l.eager.close();
        l.zone.close();
        l.eager_tx.close();
        if (l.cq) ibex_destroy_cq(l.cq);
        if (l.pd) ibex_dealloc_pd(l.pd);
        if (l.ctx) ibex_close_device(l.ctx);
    }
}

ibex_status_t Executor::open_link(Link &l, const char *device, int cqe) {
    l.channels = 0;
    IBEX_TRY(ibex_open_device(device, nullptr, &l.ctx));
    IBEX_TRY(ibex_alloc_pd(l.ctx, &l.pd));
    IBEX_TRY(ibex_create_cq(l.ctx, cqe, &l.cq));
    return ibex_cq_fd(l.cq, &l.cq_fd);
}

std::vector<int> Executor::cq_fds() const {
    std::vector<int> out;
    for (int k = 0; k < nlinks_; ++k) out.push_back(links_[k].cq_fd);
    return out;
}

ibex_status_t Executor::open(const char *device, const char *local_device, int rank, int nranks,
                             const std::vector<int> &peers, const std::vector<uint8_t> &local,
                             const ExecutorParams &params) {
    rank_ = rank;
    nranks_ = nranks;
    params_ = params;
    device_ = device ? device : "";
    local_device_ = local_device ? local_device : "";
    local_ = local;
    local_.resize(static_cast<size_t>(nranks), 0);
    chan_of_.assign(static_cast<size_t>(nranks), -1);
    // Room for a channel to every rank: add_peers moves none of them.
    chans_.reserve(static_cast<size_t>(nranks));
    // The device is opened only when some peer needs it (or none needs shm): an idle soft
    // context would still run its progress thread on this host's cores.
    size_t on_shm = 0;
    for (int p : peers) on_shm += !local_device_.empty() && local_[static_cast<size_t>(p)];
    const bool need_device = on_shm < peers.size() || on_shm == 0;
    nlinks_ = 0;
    for (int kind = 0; kind < 2; ++kind) {
        int link;
        if (kind == 0 ? need_device : on_shm > 0) IBEX_TRY(open_kind(kind, &link));
    }
    chans_.resize(peers.size());
    for (size_t i = 0; i < peers.size(); ++i) {
        Channel &c = chans_[i];
        c.rank = peers[i];
        c.link = link_of_kind_[!local_device_.empty() && local_[static_cast<size_t>(c.rank)] ? 1 : 0];
        c.on_link = links_[c.link].channels++;
        chan_of_[static_cast<size_t>(c.rank)] = static_cast<int>(i);
    }
    const size_t eager_bytes = params.eager_bytes * static_cast<size_t>(params.eager_slots);
    if (eager_slots(params))
        for (int k = 0; k < nlinks_; ++k)
            if (links_[k].channels) {
                IBEX_TRY(links_[k].eager.open(links_[k].pd, eager_bytes * static_cast<size_t>(links_[k].channels),
                                              0, "eager rings"));
                IBEX_TRY(links_[k].eager_tx.open(links_[k].pd, eager_bytes * static_cast<size_t>(links_[k].channels),
                                                 0, "eager send buffers"));
            }
    if (params.zone_bytes)
        for (int k = 0; k < nlinks_; ++k)
            if (links_[k].channels)
                IBEX_TRY(links_[k].zone.open(links_[k].pd, params.zone_bytes * static_cast<size_t>(links_[k].channels), 0,
                                             "landing zones"));
    for (Channel &c : chans_) {
        Link &l = links_[c.link];
        const size_t at = static_cast<size_t>(c.on_link);
        IBEX_TRY(setup_channel(c, l.eager ? l.eager.data() + at * eager_bytes : nullptr,
                               l.eager_tx ? l.eager_tx.data() + at * eager_bytes : nullptr,
                               l.zone ? l.zone.data() + at * params.zone_bytes : nullptr));
    }
    return IBEX_OK;
}

ibex_status_t Executor::open_kind(int kind, int *link) {
    const char *name = kind == 0 ? device_.c_str() : local_device_.c_str();
    // A CQ for every rank of this kind: the first alltoall adds channels to them all.
    size_t ranks = 0;
    for (int p = 0; p < nranks_; ++p)
        ranks += p != rank_ && (!local_device_.empty() && local_[static_cast<size_t>(p)]) == (kind == 1);
    const uint32_t per_channel = static_cast<uint32_t>(4 * params_.window + 16 + eager_slots(params_) + rx_depth(params_));
    const int cqe = static_cast<int>(per_channel * std::max<size_t>(ranks, 1) + 64);
    if (nlinks_ >= kMaxLinks) return fail(IBEX_ERR_INTERNAL, "more than %d links", kMaxLinks);
    if (ibex_status_t st = open_link(links_[nlinks_], name, cqe); st != IBEX_OK) {
        // What it opened is closed with the executor (the destructor visits every link).
        return kind == 0 ? st : fail(st, "opening %s for the ranks of this host: %s", name, ibex_last_error());
    }
    link_of_kind_[kind] = *link = nlinks_++;
    return IBEX_OK;
}

ibex_status_t Executor::link_for(int peer, int *link) {
    const int kind = !local_device_.empty() && local_[static_cast<size_t>(peer)] ? 1 : 0;
    if (link_of_kind_[kind] >= 0) {
        *link = link_of_kind_[kind];
        return IBEX_OK;
    }
    return open_kind(kind, link);
}

ibex_status_t Executor::setup_channel(Channel &c, uint8_t *eager, uint8_t *eager_tx, uint8_t *zone) {
    const size_t eager_bytes = params_.eager_bytes * static_cast<size_t>(params_.eager_slots);
    ibex_pd_t *pd = links_[c.link].pd;
    ibex_qp_init_attr_t a = IBEX_QP_INIT_ATTR_INIT;
    a.send_cq = links_[c.link].cq;
    a.recv_cq = links_[c.link].cq;
    a.max_send_wr = static_cast<uint32_t>(params_.sq_depth ? params_.sq_depth
                                                           : 4 * params_.window + 16 + eager_slots(params_));
    a.max_recv_wr = static_cast<uint32_t>(rx_depth(params_));
    a.max_send_sge = 1;
    a.max_recv_sge = 1;
    IBEX_TRY(ibex_create_qp(pd, &a, &c.qp));
    c.rx.assign(static_cast<size_t>(rx_depth(params_)) * kRxBytes, 0);
    IBEX_TRY(ibex_reg_mr(pd, c.rx.data(), c.rx.size(), IBEX_ACCESS_LOCAL_WRITE, &c.rx_mr));
    if (eager_slots(params_)) {
        IBEX_TRY(c.eager.open(pd, eager, eager_bytes, IBEX_ACCESS_LOCAL_WRITE | IBEX_ACCESS_REMOTE_WRITE, "eager ring"));
        IBEX_TRY(c.eager_tx.open(pd, eager_tx, eager_bytes, IBEX_ACCESS_LOCAL_WRITE, "eager send buffers"));
    }
    if (zone)
        IBEX_TRY(c.zone.open(pd, zone, params_.zone_bytes, IBEX_ACCESS_LOCAL_WRITE | IBEX_ACCESS_REMOTE_WRITE,
                             "landing zone"));
    return IBEX_OK;
}

ibex_status_t Executor::add_peers(const std::vector<int> &peers, size_t *first) {
    *first = chans_.size();
    if (active_) return fail(IBEX_ERR_INTERNAL, "channels added while a collective runs");
    const size_t eager_bytes = params_.eager_bytes * static_cast<size_t>(params_.eager_slots);
    for (int p : peers) {
        if (p < 0 || p >= nranks_ || p == rank_ || connected_to(p)) continue;
        int link;
        IBEX_TRY(link_for(p, &link));
        Channel &c = chans_.emplace_back();
        c.rank = p;
        c.link = link;
        c.on_link = -1;
        c.late = true;
        chan_of_[static_cast<size_t>(p)] = static_cast<int>(chans_.size() - 1);
        ibex_pd_t *pd = links_[link].pd;
        if (eager_slots(params_)) {
            IBEX_TRY(c.own_eager.open(pd, eager_bytes, 0, "eager ring"));
            IBEX_TRY(c.own_eager_tx.open(pd, eager_bytes, 0, "eager send buffers"));
        }
        IBEX_TRY(setup_channel(c, c.own_eager.data(), c.own_eager_tx.data(), nullptr));
    }
    return IBEX_OK;
}

ibex_status_t Executor::set_slicing(size_t slice_bytes, int slots) {
    for (const Channel &c : chans_)
        if (c.staging)
            return fail(IBEX_ERR_INVALID_STATE, "the slice is set before any staging is taken (rank %d has some)", rank_);
    params_.slice_bytes = slice_bytes;
    params_.slots = slots;
    return IBEX_OK;
}

ibex_status_t Executor::announce(size_t first) {
    for (size_t ci = first; ci < chans_.size(); ++ci) {
        Channel &c = chans_[ci];
        // Sent with eager slices off too (len 0): ranks must agree on which slices are eager.
        Credit m{};
        m.kind = Ctl::eager_ring;
        m.seq = static_cast<uint32_t>(eager_slots(params_));
        m.len = static_cast<uint32_t>(params_.eager_bytes);
        m.addr = reinterpret_cast<uintptr_t>(c.eager.data());
        m.rkey = c.eager.mr() ? ibex_mr_rkey(c.eager.mr()) : 0;
        if (ibex_status_t st = send_control(c, ci, m); st != IBEX_OK)
            return fail(st, "announcing the eager ring to rank %d: %s", c.rank, ibex_last_error());
        if (!c.zone) continue;
        Credit z{};
        z.kind = Ctl::zone;
        z.len = static_cast<uint32_t>(c.zone.size());
        z.addr = reinterpret_cast<uintptr_t>(c.zone.data());
        z.rkey = ibex_mr_rkey(c.zone.mr());
        if (ibex_status_t st = send_control(c, ci, z); st != IBEX_OK)
            return fail(st, "announcing the landing zone to rank %d: %s", c.rank, ibex_last_error());
    }
    return IBEX_OK;
}

std::vector<ibex_ep_addr_t> Executor::local_addrs() {
    std::vector<ibex_ep_addr_t> out(static_cast<size_t>(nranks_));
    for (Channel &c : chans_) ibex_qp_local_addr(c.qp, &out[static_cast<size_t>(c.rank)]);
    return out;
}

ibex_status_t Executor::connect(const std::vector<ibex_ep_addr_t> &remote, const QpChoice &choice, size_t first) {
    for (size_t ci = first; ci < chans_.size(); ++ci) {
        Channel &c = chans_[ci];
        if (ibex_status_t st =
                ibex_qp_connect_attr(c.qp, &remote[static_cast<size_t>(c.rank)], &choice.attr, choice.mask);
            st != IBEX_OK)
            return fail(st, "connecting to rank %d: %s", c.rank, ibex_last_error());
        for (int i = 0; i < rx_depth(params_); ++i)
            IBEX_TRY(post_recv(c, static_cast<uint32_t>(i)));
    }
    return IBEX_OK;
}

} // namespace ibex::coll
