// Runs the schedules of all ranks of a collective in one process, the way the executor
// would, but in a random order chosen by a seed: a send's bytes are read only when it
// completes (some random time after it was posted, as an RDMA engine may), slices land
// then, reductions apply in arrival order per peer once their apply dependency is done.
// A missing dependency therefore shows up as wrong data for some seed, and a schedule
// whose sends and receives do not pair up, or that cannot finish, fails outright.
#pragma once

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "allreduce/cpu/reduce.h"
#include "allreduce/schedule.h"

namespace ibex::test {

struct SimResult {
    bool ok = true;
    std::string error;
};

inline SimResult simulate(std::vector<coll::Schedule> &s, ibex_datatype_t type, ibex_redop_t op, uint64_t seed) {
    using coll::Step;
    using coll::StepKind;
    const int n = static_cast<int>(s.size());
    const size_t elem = ibex_datatype_size(type);
    SimResult res;
    auto failf = [&](std::string why) {
        res.ok = false;
        res.error = std::move(why);
        return res;
    };
    // Pair the k-th send a->b with the k-th receive of b from a.
    struct Ref {
        int rank, step;
    };
    std::vector<std::vector<std::vector<int>>> sends(n, std::vector<std::vector<int>>(n)), recvs = sends;
    for (int r = 0; r < n; ++r)
        for (size_t i = 0; i < s[r].steps.size(); ++i) {
            const Step &st = s[r].steps[i];
            if (st.kind == StepKind::local_copy) continue;
            if (st.peer < 0 || st.peer >= n || st.peer == r)
                return failf("rank " + std::to_string(r) + " step " + std::to_string(i) + ": bad peer");
            (st.kind == StepKind::send ? sends[r][st.peer] : recvs[st.peer][r]).push_back(static_cast<int>(i));
        }
    for (int a = 0; a < n; ++a)
        for (int b = 0; b < n; ++b) {
            if (sends[a][b].size() != recvs[a][b].size())
                return failf(std::to_string(a) + "->" + std::to_string(b) + ": " + std::to_string(sends[a][b].size()) +
                             " sends vs " + std::to_string(recvs[a][b].size()) + " receives");
            for (size_t k = 0; k < sends[a][b].size(); ++k)
                if (s[a].steps[sends[a][b][k]].bytes != s[b].steps[recvs[a][b][k]].bytes)
                    return failf(std::to_string(a) + "->" + std::to_string(b) + " transfer " + std::to_string(k) +
                                 ": sizes differ");
        }
    enum State : uint8_t { idle, started, inflight, landed, done };
    std::vector<std::vector<uint8_t>> state(n);
    std::vector<std::vector<std::vector<uint8_t>>> staged(n);
    std::vector<std::vector<size_t>> next_send(n, std::vector<size_t>(n)), next_credit = next_send,
                                                                            next_apply = next_send,
                                                                            next_land = next_send;
    size_t total = 0, finished = 0;
    for (int r = 0; r < n; ++r) {
        state[r].assign(s[r].steps.size(), idle);
        staged[r].resize(s[r].steps.size());
        total += s[r].steps.size();
    }
    auto is_done = [&](int r, int i) { return i < 0 || state[r][static_cast<size_t>(i)] == done; };
    auto ready = [&](int r, const Step &st) { return is_done(r, st.dep[0]) && is_done(r, st.dep[1]); };
    std::mt19937_64 rng(seed);
    struct Action {
        int kind; // 0 credit, 1 post send, 2 complete send, 3 apply, 4 local
        int r, peer, step;
    };
    std::vector<Action> acts;
    for (size_t guard = 0; finished < total; ++guard) {
        if (guard > 100 * total + 1000) return failf("no progress (livelock)");
        acts.clear();
        for (int r = 0; r < n; ++r) {
            for (size_t i = 0; i < s[r].steps.size(); ++i) {
                const Step &st = s[r].steps[i];
                if (st.kind == StepKind::local_copy && state[r][i] == idle && ready(r, st))
                    acts.push_back({4, r, -1, static_cast<int>(i)});
            }
            for (int p = 0; p < n; ++p) {
                if (next_credit[r][p] < recvs[p][r].size()) {
                    const int i = recvs[p][r][next_credit[r][p]];
                    if (ready(r, s[r].steps[i])) acts.push_back({0, r, p, i});
                }
                if (next_send[r][p] < sends[r][p].size()) {
                    const size_t k = next_send[r][p];
                    const int i = sends[r][p][k];
                    // The receiver must have announced this transfer.
                    if (ready(r, s[r].steps[i]) && next_credit[p][r] > k) acts.push_back({1, r, p, i});
                }
                // An RC connection delivers and completes in order: only the oldest
                // transfer in flight on each pair may land.
                if (next_land[r][p] < sends[r][p].size()) {
                    const int i = sends[r][p][next_land[r][p]];
                    if (state[r][i] == inflight) acts.push_back({2, r, p, i});
                }
                if (next_apply[r][p] < recvs[p][r].size()) {
                    const int i = recvs[p][r][next_apply[r][p]];
                    const Step &st = s[r].steps[i];
                    if (state[r][i] == landed && is_done(r, st.apply_dep)) acts.push_back({3, r, p, i});
                    if (state[r][i] == done) ++next_apply[r][p]; // copies finish on landing
                }
            }
        }
        if (acts.empty()) return failf("deadlock: " + std::to_string(finished) + " of " + std::to_string(total) +
                                       " steps done");
        const Action a = acts[rng() % acts.size()];
        Step &st = s[a.r].steps[a.step];
        switch (a.kind) {
        case 0:
            state[a.r][a.step] = started;
            ++next_credit[a.r][a.peer];
            break;
        case 1:
            state[a.r][a.step] = inflight;
            ++next_send[a.r][a.peer];
            break;
        case 2: {
            // Find the matching receive: same index in the pair's order.
            const size_t k = next_land[a.r][a.peer]++;
            const int ri = recvs[a.r][a.peer][k];
            Step &rs = s[a.peer].steps[ri];
            if (rs.kind == StepKind::recv_copy) {
                if (st.bytes) std::memcpy(rs.dst, st.src, st.bytes);
                state[a.peer][ri] = done;
                ++finished;
            } else {
                staged[a.peer][ri].assign(static_cast<const uint8_t *>(st.src),
                                          static_cast<const uint8_t *>(st.src) + st.bytes);
                state[a.peer][ri] = landed;
            }
            state[a.r][a.step] = done;
            ++finished;
            break;
        }
        case 3:
            if (st.landed_first)
                coll::reduce_into(st.dst, staged[a.r][a.step].data(), st.src, st.bytes / elem, type, op);
            else
                coll::reduce_into(st.dst, st.src, staged[a.r][a.step].data(), st.bytes / elem, type, op);
            if (st.finalize && op == IBEX_AVG) coll::finalize_avg(st.dst, st.bytes / elem, type, n);
            state[a.r][a.step] = done;
            ++next_apply[a.r][a.peer];
            ++finished;
            break;
        case 4:
            if (st.bytes) std::memmove(st.dst, st.src, st.bytes);
            state[a.r][a.step] = done;
            ++finished;
            break;
        }
    }
    return res;
}

} // namespace ibex::test
