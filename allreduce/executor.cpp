// Running a schedule on the executor's channels: posting sends (eager copies, credited or
// direct WRITE_WITH_IMMs), announcing destinations, folding landed slices into place in
// arrival order, local copies, and the progress pass that polls the CQs between them.
// Set-up is executor_setup.cpp's; what completions mean, executor_completions.cpp's.
#include "allreduce/executor.h"
#include "allreduce/executor_queues.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>

#include "allreduce/cpu/reduce.h"
#include "allreduce/cuda/dispatch.h"
#include "runtime/base/status.h"

namespace ibex::coll {
namespace {

// Whether a local copy step goes in bounded pieces, one per pass (a copy of several MiB
// would hold credits and completions back meanwhile): between host buffers yes; device
// memory (one cudaMemcpy and its wait) and ranges that overlap (a forward piece could
// overwrite bytes not yet copied) go whole. Asked once per step, at its first piece.
bool copies_in_pieces(const Step &st) {
    const auto *d = static_cast<const uint8_t *>(st.dst), *s = static_cast<const uint8_t *>(st.src);
    return !(d < s + st.bytes && s < d + st.bytes) && !is_device_pointer(st.dst) && !is_device_pointer(st.src);
}

uint64_t now_ns() {
    return static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
            .count());
}

} // namespace

ibex_status_t Executor::send_control(Channel &c, size_t ci, const Credit &m) {
    ibex_sge_t sge{reinterpret_cast<uintptr_t>(&m), sizeof m, 0};
    ibex_send_wr_t wr{};
    wr.wr_id = wr_id(kCredit, ci, 0);
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBEX_WR_SEND;
    // Unsignaled: nothing waits for a control message's completion (the executor would
    // ignore it), so its peer acknowledges it lazily; the data sends around it are
    // signaled often enough to free the send queue.
    wr.send_flags = IBEX_SEND_INLINE;
    const ibex_status_t st = ibex_post_send(c.qp, &wr, nullptr);
    if (st == IBEX_OK) ++control_sent_;
    return st;
}

ibex_status_t Executor::write_to(int peer, std::span<const WritePiece> pieces, uint32_t lkey, uint32_t rkey) {
    if (shut_) return fail(IBEX_ERR_INVALID_STATE, "the communicator's connections are shut down");
    if (!connected_to(peer)) return fail(IBEX_ERR_INTERNAL, "no QP to rank %d", peer);
    constexpr size_t kMaxPieces = 4;
    if (pieces.empty() || pieces.size() > kMaxPieces)
        return fail(IBEX_ERR_INTERNAL, "%zu WRITEs in one chain (1..%zu)", pieces.size(), kMaxPieces);
    const size_t ci = static_cast<size_t>(chan_of_[static_cast<size_t>(peer)]);
    ibex_sge_t sge[kMaxPieces];
    ibex_send_wr_t wr[kMaxPieces];
    for (size_t i = 0; i < pieces.size(); ++i) {
        sge[i] = {reinterpret_cast<uintptr_t>(pieces[i].src), static_cast<uint32_t>(pieces[i].bytes), lkey};
        wr[i] = ibex_send_wr_t{};
        wr[i].wr_id = wr_id(kFastbox, ci, 0);
        wr[i].sg_list = &sge[i];
        wr[i].num_sge = 1;
        wr[i].opcode = IBEX_WR_RDMA_WRITE;
        wr[i].wr.rdma.remote_addr = pieces[i].remote;
        wr[i].wr.rdma.rkey = rkey;
        wr[i].next = i + 1 < pieces.size() ? &wr[i + 1] : nullptr;
    }
    // Full only when WRITEs queue up instead of completing in place: let completions drain,
    // then post what the provider did not take.
    ibex_send_wr_t *rest = wr;
    for (int attempt = 0;; ++attempt) {
        ibex_send_wr_t *bad = nullptr;
        const ibex_status_t st = ibex_post_send(chans_[ci].qp, rest, &bad);
        if (st == IBEX_OK) return IBEX_OK;
        if (st != IBEX_ERR_QUEUE_FULL || attempt == 10000 || !bad)
            return fail(st, "writing to rank %d's fast box: %s", peer, ibex_last_error());
        rest = bad;
        bool did = false;
        IBEX_TRY(progress(&did));
    }
}

ibex_status_t Executor::send_from_copy(Channel &c, size_t ci, const Step &st, ibex_sge_t *sge, ibex_send_wr_t *wr) {
    const size_t slots = static_cast<size_t>(eager_slots(params_));
    uint8_t *copy = c.eager_tx.data() + (c.tx_bounced % slots) * params_.eager_bytes;
    if (st.bytes) IBEX_TRY(copy_any(copy, st.src, st.bytes));
    *sge = ibex_sge_t{reinterpret_cast<uintptr_t>(copy), static_cast<uint32_t>(st.bytes), ibex_mr_lkey(c.eager_tx.mr())};
    // Only every few sends from the copies is signaled: its completion frees its copy and
    // the ones before it (an RC QP completes in order). The others then ask their peer for
    // no ACK of their own, which it sends lazily, in the batch of its next data.
    const uint32_t every = std::max<uint32_t>(1, static_cast<uint32_t>(slots) / 2);
    wr->wr_id = wr_id(kEagerData, ci, c.tx_bounced);
    wr->send_flags = (c.tx_bounced + 1) % every == 0 ? IBEX_SEND_SIGNALED : 0;
    return IBEX_OK;
}

ibex_status_t Executor::post_recv(Channel &c, uint32_t idx) {
    ibex_sge_t sge{reinterpret_cast<uintptr_t>(c.rx.data() + idx * kRxBytes), static_cast<uint32_t>(kRxBytes),
                   ibex_mr_lkey(c.rx_mr)};
    ibex_recv_wr_t wr{};
    wr.wr_id = wr_id(kRecv, static_cast<size_t>(&c - chans_.data()), idx);
    wr.sg_list = &sge;
    wr.num_sge = 1;
    return ibex_post_recv(c.qp, &wr, nullptr);
}

ibex_status_t Executor::ensure_staging(Channel &c) {
    if (c.staging) return IBEX_OK;
    const size_t bytes = params_.slice_bytes * static_cast<size_t>(params_.slots);
    Link &l = links_[c.link];
    uint8_t *base;
    if (c.late) {
        IBEX_TRY(c.own_staging.open(l.pd, bytes, 0, "staging area"));
        base = c.own_staging.data();
    } else {
        if (!l.staging) IBEX_TRY(l.staging.open(l.pd, bytes * static_cast<size_t>(l.channels), 0, "staging areas"));
        base = l.staging.data() + static_cast<size_t>(c.on_link) * bytes;
    }
    IBEX_TRY(c.staging.open(l.pd, base, bytes, IBEX_ACCESS_LOCAL_WRITE | IBEX_ACCESS_REMOTE_WRITE, "staging area"));
    for (int i = params_.slots - 1; i >= 0; --i) c.free_slots.push_back(i);
    return IBEX_OK;
}

ibex_status_t Executor::reduce_landed(const Step &st, const uint8_t *landed) {
    const size_t count = st.bytes / elem_;
    // *_any: GPU buffers take the CUDA kernels (allreduce/cuda/dispatch.h).
    const void *left = st.landed_first ? static_cast<const void *>(landed) : st.src;
    const void *right = st.landed_first ? st.src : static_cast<const void *>(landed);
    IBEX_TRY(reduce_into_any(st.dst, left, right, count, type_, op_));
    if (st.finalize && op_ == IBEX_AVG) return finalize_avg_any(st.dst, count, type_, nranks_);
    return IBEX_OK;
}

ibex_status_t Executor::start(const Schedule &s, ibex_datatype_t type, ibex_redop_t op, RegCaches &caches,
                               bool timed) {
    if (shut_) return fail(IBEX_ERR_INVALID_STATE, "the communicator's connections are shut down");
    sched_ = s; // copy-assigned: the steps' storage is reused from op to op
    type_ = type;
    op_ = op;
    elem_ = ibex_datatype_size(type);
    const size_t n = sched_.steps.size();
    done_flag_.assign(n, 0);
    timed_ = timed;
    done_ns_.assign(timed ? n : 0, 0);
    lkey_.assign(n, 0);
    rkey_.assign(n, 0);
    locals_.clear();
    next_local_ = 0;
    local_copied_ = 0;
    done_ = 0;
    op_chans_.clear();
    bool all_eager = true; // every send leaves from the eager buffers
    for (Channel &c : chans_) {
        c.sends.clear();
        c.recvs.clear();
        c.slot_of.clear();
        c.eager_slot_of.clear();
        c.next_send = c.next_credit = c.next_arrival = c.next_apply = 0;
        c.recv_base = c.arrive_seq;
    }
    for (size_t i = 0; i < n; ++i) {
        const Step &st = sched_.steps[i];
        if (st.kind == StepKind::local_copy) {
            locals_.push_back(static_cast<int>(i));
            continue;
        }
        if (!connected_to(st.peer))
            return fail(IBEX_ERR_INTERNAL, "schedule step %zu talks to rank %d, which has no QP", i, st.peer);
        Channel &c = chans_[static_cast<size_t>(chan_of_[static_cast<size_t>(st.peer)])];
        RegCache &cache = caches.of(c.link);
        if (c.sends.empty() && c.recvs.empty()) op_chans_.push_back(chan_of_[static_cast<size_t>(st.peer)]);
        ibex_mr_t *mr = nullptr;
        if (st.kind == StepKind::send) {
            c.sends.push_back(static_cast<int>(i));
            if (sched_.direct || !is_eager(st.bytes)) all_eager = false;
            // Eager slices, and direct ones as small, leave from the channel's own buffers.
            if (st.bytes && !(is_eager(st.bytes) && (!sched_.direct || eager_slots(params_)))) {
                IBEX_TRY(cache.get(st.src, st.bytes, &mr));
                lkey_[i] = ibex_mr_lkey(mr);
            }
        } else {
            c.recvs.push_back(static_cast<int>(i));
            c.slot_of.push_back(-1);
            c.eager_slot_of.push_back(-1);
            if (sched_.direct) {
                // Lands where the sender writes it: the zone (reductions) or the recvbuf
                // announced by this collective's ready.
                if (st.kind == StepKind::recv_reduce && (!c.zone || st.remote_off + st.bytes > c.zone.size()))
                    return fail(IBEX_ERR_INTERNAL, "direct step of %zu bytes at %llu leaves the landing zone", st.bytes,
                                static_cast<unsigned long long>(st.remote_off));
                continue;
            }
            if (is_eager(st.bytes)) continue; // lands in the eager ring
            if (st.kind == StepKind::recv_reduce) {
                if (st.bytes > params_.slice_bytes)
                    return fail(IBEX_ERR_INTERNAL, "reduction step of %zu bytes exceeds the staging slot", st.bytes);
                IBEX_TRY(ensure_staging(c));
            } else if (st.bytes) {
                IBEX_TRY(cache.get(st.dst, st.bytes, &mr));
                rkey_[i] = ibex_mr_rkey(mr);
            }
        }
    }
    if (sched_.direct && sched_.direct_recv_bytes) {
        // The recvbuf goes to each peer when it differs from the one announced last (the
        // zones were announced at connection). Nothing else is needed: a peer writes this
        // collective's scatter into the zone only after it got this rank's gather of the
        // last one (so the zone was read), and its gather only after this rank's scatter,
        // which follows this announcement on the same connection.
        ibex_mr_t *link_mr[kMaxLinks] = {};
        for (int ci : op_chans_) {
            Channel &c = chans_[static_cast<size_t>(ci)];
            ibex_mr_t *&mr = link_mr[c.link]; // one lookup per link, not per peer
            if (!mr) IBEX_TRY(caches.of(c.link).get(sched_.direct_recvbuf, sched_.direct_recv_bytes, &mr));
            Credit m{};
            m.kind = Ctl::ready;
            m.addr = reinterpret_cast<uintptr_t>(sched_.direct_recvbuf);
            m.rkey = ibex_mr_rkey(mr);
            m.len = static_cast<uint32_t>(sched_.direct_recv_bytes);
            if (c.announced.kind == Ctl::ready && c.announced.addr == m.addr && c.announced.rkey == m.rkey &&
                c.announced.len >= m.len)
                continue;
            if (ibex_status_t st = send_control(c, static_cast<size_t>(ci), m); st != IBEX_OK)
                return fail(st, "announcing this rank's recvbuf to rank %d: %s", c.rank, ibex_last_error());
            c.announced = m;
        }
    }
    active_ = true;
    fresh_ = all_eager;
    // Eager slices that came ahead of this collective take their places now.
    for (int ci : op_chans_) {
        Channel &c = chans_[static_cast<size_t>(ci)];
        while (!c.early.empty() && c.next_arrival < c.recvs.size()) {
            const uint32_t e = c.early.front();
            c.early.pop_front();
            IBEX_TRY(match_arrival(c, !(e & Channel::kEarlyDirect), e & ~Channel::kEarlyDirect));
        }
    }
    return IBEX_OK;
}

void Executor::mark_done(int i) {
    done_flag_[static_cast<size_t>(i)] = 1;
    if (timed_) done_ns_[static_cast<size_t>(i)] = now_ns();
    ++done_;
}

void Executor::unmark_done(int i) {
    done_flag_[static_cast<size_t>(i)] = 0;
    --done_;
}

ibex_status_t Executor::post_chain(Channel &c, SendChain &chain, bool *full) {
    *full = false;
    const int n = chain.n;
    chain.n = 0;
    if (n == 0) return IBEX_OK;
    for (int k = 0; k < n; ++k) {
        chain.wr[k].sg_list = &chain.sge[k];
        chain.wr[k].next = k + 1 < n ? &chain.wr[k + 1] : nullptr;
    }
    ibex_send_wr_t *bad = nullptr;
    const ibex_status_t st = ibex_post_send(c.qp, chain.wr, &bad);
    if (st == IBEX_OK) return IBEX_OK;
    if (st != IBEX_ERR_QUEUE_FULL || !bad) return fail(st, "sending to rank %d: %s", c.rank, ibex_last_error());
    *full = true;
    using How = SendChain::How;
    for (int k = n - 1; k >= static_cast<int>(bad - chain.wr); --k) {
        ++taken_back_;
        --c.next_send;
        --c.send_seq;
        switch (chain.how[k]) {
        case How::eager:
            --c.eager_sent;
            [[fallthrough]];
        case How::bounced:
            --c.tx_bounced;
            unmark_done(chain.step[k]);
            break;
        case How::credited:
            c.credits.push_front(chain.credit[k]);
            [[fallthrough]];
        case How::direct:
            --c.data_posted;
            break;
        }
    }
    return IBEX_OK;
}

ibex_status_t Executor::advance(bool *did) {
    using How = SendChain::How;
    SendChain chain;
    for (int ci : op_chans_) {
        Channel &c = chans_[static_cast<size_t>(ci)];
        // Post sends whose data is ready and whose destination is known: the next eager slot
        // of the peer for a small slice, else an announced buffer. Counted as posted when
        // staged in the chain (a later slice's eager slot and send buffer follow from them).
        bool full = false;
        while (c.next_send < c.sends.size()) {
            const int i = c.sends[c.next_send];
            const Step &st = sched_.steps[static_cast<size_t>(i)];
            if (!ready(st)) break;
            ibex_sge_t sge{reinterpret_cast<uintptr_t>(st.src), static_cast<uint32_t>(st.bytes), lkey_[static_cast<size_t>(i)]};
            ibex_send_wr_t wr{};
            wr.wr_id = wr_id(kData, static_cast<size_t>(ci), static_cast<uint32_t>(i));
            wr.sg_list = &sge;
            wr.num_sge = st.bytes ? 1 : 0;
            wr.opcode = IBEX_WR_RDMA_WRITE_WITH_IMM;
            wr.send_flags = IBEX_SEND_SIGNALED;
            wr.imm_data = c.send_seq & kImmSeqMask;
            const bool eager = !sched_.direct && is_eager(st.bytes);
            bool bounced = false; // a direct slice sent from a copy
            if (eager) {
                const uint32_t own_slots = static_cast<uint32_t>(params_.eager_slots);
                if (!c.peer_eager_known || c.eager_sent - c.eager_freed >= c.peer_eager_slots ||
                    c.tx_bounced - c.eager_tx_done >= own_slots)
                    break;
                if (st.bytes > c.peer_eager_slot_bytes)
                    return fail(IBEX_ERR_INVALID_ARGUMENT,
                                "rank %d takes eager slices of up to %u bytes, this rank sends %zu: set "
                                "IBEX_COMM_EAGER alike on every rank",
                                c.rank, c.peer_eager_slot_bytes, st.bytes);
                // Copied out first, so the step is done once posted: the collective need not
                // wait for the peer's acknowledgement, and the caller may reuse src at once.
                IBEX_TRY(send_from_copy(c, static_cast<size_t>(ci), st, &sge, &wr));
                wr.imm_data |= kImmEager;
                wr.wr.rdma.remote_addr = c.peer_eager_addr + uint64_t(c.eager_sent % c.peer_eager_slots) * c.peer_eager_slot_bytes;
                wr.wr.rdma.rkey = c.peer_eager_rkey;
            } else if (sched_.direct) {
                // Where the schedule says it lands, no more than a window in flight (each
                // takes one of the peer's receives).
                const bool zone = st.lands == Step::Lands::zone;
                if (!c.peer_zone_known || (!zone && st.bytes && c.peer_recvbuf.kind != Ctl::ready) ||
                    c.data_posted - c.data_done >= static_cast<uint64_t>(params_.window))
                    break;
                const Credit &rd = c.peer_recvbuf;
                const uint64_t room = zone ? c.peer_zone_bytes : rd.len;
                if (st.lands == Step::Lands::credit || st.remote_off > room || st.bytes > room - st.remote_off)
                    return fail(IBEX_ERR_INVALID_ARGUMENT,
                                "rank %d has %llu bytes %s where this rank writes %zu at %llu: the ranks called different "
                                "collectives, counts or types, or set IBEX_GDRAA_ZONE differently",
                                c.rank, static_cast<unsigned long long>(room), zone ? "of landing zone" : "of recvbuf",
                                st.bytes, static_cast<unsigned long long>(st.remote_off));
                wr.wr.rdma.remote_addr = (zone ? c.peer_zone_addr : rd.addr) + st.remote_off;
                wr.wr.rdma.rkey = zone ? c.peer_zone_rkey : rd.rkey;
                // Small slices leave from a copy, as eager ones do: the step is done once
                // posted, not one acknowledgement later (which a latency-bound collective
                // would pay at its end).
                const uint32_t own_slots = static_cast<uint32_t>(eager_slots(params_));
                bounced = own_slots && st.bytes <= params_.eager_bytes;
                if (bounced) {
                    if (c.tx_bounced - c.eager_tx_done >= own_slots) break;
                    IBEX_TRY(send_from_copy(c, static_cast<size_t>(ci), st, &sge, &wr));
                }
            } else {
                if (c.credits.empty()) break;
                const Credit &cr = c.credits.front();
                if (cr.seq != c.send_seq)
                    return fail(IBEX_ERR_INTERNAL, "rank %d: credit %u, expected %u", c.rank, cr.seq, c.send_seq);
                if (cr.len != st.bytes)
                    return fail(IBEX_ERR_INVALID_ARGUMENT,
                                "rank %d expects %u bytes where this rank sends %zu: the ranks called different "
                                "collectives, counts or types, or a send and its receive differ in length",
                                c.rank, cr.len, st.bytes);
                wr.wr.rdma.remote_addr = cr.addr;
                wr.wr.rdma.rkey = cr.rkey;
            }
            const int k = chain.n++;
            chain.sge[k] = sge;
            chain.wr[k] = wr;
            chain.step[k] = i;
            if (eager) {
                ++c.eager_sent;
                ++c.tx_bounced;
                mark_done(i);
                chain.how[k] = How::eager;
            } else if (bounced) {
                ++c.tx_bounced;
                mark_done(i);
                chain.how[k] = How::bounced;
            } else if (sched_.direct) {
                ++c.data_posted;
                chain.how[k] = How::direct;
            } else {
                ++c.data_posted;
                chain.credit[k] = c.credits.front();
                c.credits.pop_front();
                chain.how[k] = How::credited;
            }
            ++c.send_seq;
            ++c.next_send;
            *did = true;
            if (chain.n == SendChain::kMax) {
                IBEX_TRY(post_chain(c, chain, &full));
                if (full) break;
            }
        }
        IBEX_TRY(post_chain(c, chain, &full));
        // Announce destinations for receives that may start (eager ones need none).
        // (Eager slices may arrive before the loop passes them: next_arrival can lead.)
        while (!sched_.direct && c.next_credit < c.recvs.size() &&
               c.next_credit < c.next_arrival + static_cast<size_t>(params_.window)) {
            const int i = c.recvs[c.next_credit];
            const Step &st = sched_.steps[static_cast<size_t>(i)];
            if (is_eager(st.bytes)) {
                ++c.next_credit;
                continue;
            }
            if (!ready(st)) break;
            Credit cr{};
            cr.kind = Ctl::credit;
            cr.seq = c.recv_base + static_cast<uint32_t>(c.next_credit);
            cr.len = static_cast<uint32_t>(st.bytes);
            if (st.kind == StepKind::recv_reduce) {
                if (c.free_slots.empty()) break;
                const int slot = c.free_slots.back();
                c.slot_of[c.next_credit] = slot;
                cr.addr = reinterpret_cast<uintptr_t>(c.staging.data()) + static_cast<size_t>(slot) * params_.slice_bytes;
                cr.rkey = ibex_mr_rkey(c.staging.mr());
            } else {
                cr.addr = reinterpret_cast<uintptr_t>(st.dst);
                cr.rkey = rkey_[static_cast<size_t>(i)];
            }
            const ibex_status_t st2 = send_control(c, static_cast<size_t>(ci), cr);
            if (st2 == IBEX_ERR_QUEUE_FULL) break;
            if (st2 != IBEX_OK) return fail(st2, "announcing to rank %d: %s", c.rank, ibex_last_error());
            if (st.kind == StepKind::recv_reduce) c.free_slots.pop_back();
            ++c.next_credit;
            *did = true;
        }
        // Fold landed slices into place, in arrival order.
        while (c.next_apply < c.next_arrival) {
            const int i = c.recvs[c.next_apply];
            const Step &st = sched_.steps[static_cast<size_t>(i)];
            if (const int eslot = c.eager_slot_of[c.next_apply]; eslot >= 0) {
                // An eager slice: its destination was never announced, so it waits here until
                // the destination may be written.
                if (!ready(st)) break;
                if (st.kind == StepKind::recv_reduce && st.apply_dep >= 0 && !done_flag_[static_cast<size_t>(st.apply_dep)])
                    break;
                const uint8_t *landed = c.eager.data() + static_cast<size_t>(eslot) * params_.eager_bytes;
                if (st.kind == StepKind::recv_reduce) {
                    IBEX_TRY(reduce_landed(st, landed));
                } else if (st.bytes) {
                    IBEX_TRY(copy_any(st.dst, landed, st.bytes));
                }
                ++c.eager_consumed;
                mark_done(i);
                *did = true;
            } else if (st.kind == StepKind::recv_reduce && sched_.direct) {
                if (!ready(st)) break;
                if (st.apply_dep >= 0 && !done_flag_[static_cast<size_t>(st.apply_dep)]) break;
                IBEX_TRY(reduce_landed(st, c.zone.data() + st.remote_off));
                mark_done(i);
                *did = true;
            } else if (st.kind == StepKind::recv_reduce) {
                if (st.apply_dep >= 0 && !done_flag_[static_cast<size_t>(st.apply_dep)]) break;
                const int slot = c.slot_of[c.next_apply];
                const uint8_t *landed = c.staging.data() + static_cast<size_t>(slot) * params_.slice_bytes;
                IBEX_TRY(reduce_landed(st, landed));
                c.free_slots.push_back(slot);
                mark_done(i);
                *did = true;
            }
            ++c.next_apply;
        }
        // Hand consumed eager slots back, half a ring at a time.
        if (c.eager && c.eager_consumed - c.eager_returned >= static_cast<uint32_t>(std::max(1, params_.eager_slots / 2))) {
            Credit m{};
            m.kind = Ctl::eager_return;
            m.seq = c.eager_consumed;
            const ibex_status_t st2 = send_control(c, static_cast<size_t>(ci), m);
            if (st2 == IBEX_OK) c.eager_returned = c.eager_consumed;
            else if (st2 != IBEX_ERR_QUEUE_FULL) return fail(st2, "returning eager slots to rank %d: %s", c.rank, ibex_last_error());
        }
    }
    while (next_local_ < locals_.size()) {
        const int i = locals_[next_local_];
        const Step &st = sched_.steps[static_cast<size_t>(i)];
        if (!ready(st)) break;
        constexpr size_t kPiece = size_t(1) << 20;
        if (local_copied_ == 0) local_in_pieces_ = copies_in_pieces(st);
        const size_t left = st.bytes - local_copied_;
        const size_t n = local_in_pieces_ ? std::min(left, kPiece) : left;
        if (n)
            IBEX_TRY(copy_any(static_cast<uint8_t *>(st.dst) + local_copied_,
                              static_cast<const uint8_t *>(st.src) + local_copied_, n));
        local_copied_ += n;
        *did = true;
        if (local_copied_ < st.bytes) break;
        mark_done(i);
        ++next_local_;
        local_copied_ = 0;
    }
    return IBEX_OK;
}

ibex_status_t Executor::progress(bool *did) {
    *did = false;
    if (fresh_ && active_ && !shut_) {
        fresh_ = false;
        IBEX_TRY(advance(did));
    }
    ibex_wc_t wc[32];
    for (int link = 0; link < nlinks_; ++link)
        for (int round = 0; round < 8; ++round) {
            int got = 0;
            IBEX_TRY(ibex_poll_cq(links_[link].cq, 32, wc, &got));
            for (int k = 0; k < got && !shut_; ++k)
                IBEX_TRY(handle(wc[k], did));
            if (got < 32) break;
        }
    if (!active_ || shut_) return IBEX_OK;
    // A step finished in this pass may unblock one met earlier in it: go round until still.
    for (int pass = 0; pass < 8; ++pass) {
        bool moved = false;
        IBEX_TRY(advance(&moved));
        if (!moved) break;
        *did = true;
    }
    return IBEX_OK;
}

bool Executor::arm() {
    // Timeout 0: arms the CQ's descriptor and lets the transport's own progress thread take
    // over; IBEX_OK means completions are already waiting.
    for (int link = 0; link < nlinks_; ++link)
        if (ibex_cq_wait(links_[link].cq, 0) == IBEX_OK) return false;
    return true;
}

void Executor::shut_down() {
    for (Channel &c : chans_) {
        ibex_qp_attr_t a = IBEX_QP_ATTR_INIT;
        a.qp_state = IBEX_QPS_ERR;
        ibex_modify_qp(c.qp, &a, IBEX_QP_STATE);
    }
    active_ = false;
    shut_ = true;
}

std::string Executor::stall_detail() const {
    std::string out;
    char buf[256];
    for (int ci : op_chans_) {
        const Channel &c = chans_[static_cast<size_t>(ci)];
        std::snprintf(buf, sizeof buf,
                      "[rank %d: sends %zu/%zu, credits held %zu, announced %zu, arrived %zu, applied %zu of %zu; "
                      "eager out %u (freed %u, ring %s), eager in %u (consumed %u, returned %u, early %zu)]",
                      c.rank, c.next_send, c.sends.size(), c.credits.size(), c.next_credit, c.next_arrival,
                      c.next_apply, c.recvs.size(), c.eager_sent, c.eager_freed, c.peer_eager_known ? "known" : "unknown",
                      c.eager_arrived, c.eager_consumed, c.eager_returned, c.early.size());
        out += buf;
    }
    return out;
}

int Executor::waiting_on() const {
    for (int ci : op_chans_) {
        const Channel &c = chans_[static_cast<size_t>(ci)];
        if (c.next_arrival < c.recvs.size()) return c.rank;
        if (c.next_send < c.sends.size() && c.credits.empty()) return c.rank;
    }
    return -1;
}

} // namespace ibex::coll
