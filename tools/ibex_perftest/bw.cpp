// Bandwidth of every verb (ib_write_bw, ib_read_bw, ib_send_bw, ib_atomic_bw): the sending
// side keeps tx-depth operations in flight on each QP with CQ moderation and times them;
// for SEND the other side takes the messages into posted receives and times those. With
// -b both sides do both. After each size the two sides swap their rows over TCP, so each
// prints what perftest's would: the client its own figures, the server of a WRITE, READ or
// atomic test the client's, the receiver of a SEND test its own, and with -b the sum.
#include <algorithm>
#include <cinttypes>

#include "tools/ibex_perftest/ops.h"
#include "tools/ibex_perftest/perftest.h"
#include "tools/ibex_perftest/session.h"
#include "tools/ibex_perftest/ticks.h"

namespace ibex::perftest {

namespace {

constexpr uint64_t kRecvTag = 1ull << 63; // wr_id bit of receive WRs
constexpr int kPollBatch = 32;
constexpr uint64_t kQuietNs = 200'000'000; // a timed receiver's end: this long without arrivals

// One size on this side: posting (sends), taking SENDs (receives), or both.
class BwFlow {
public:
    BwFlow(Session &s, uint32_t depth, uint32_t cq_mod, uint32_t list)
        : s_(s), o_(s.o_), depth_(depth), cq_mod_(cq_mod), list_(list) {}

    std::string err;

    // SEND tests: every QP gets rx-depth receives of the largest size, re-posted as they
    // complete, for the whole run.
    bool post_receives() {
        for (uint32_t q = 0; q < s_.res.qps.size(); ++q)
            for (uint32_t i = 0; i < o_.rx_depth; ++i)
                if (!post_recv(q)) return false;
        return true;
    }

    // Runs one size; *sent and *received get this side's figures (iters 0 when idle).
    // met: when this side entered the meeting before the size, which no peer's first send
    // can precede; a receiver times from there.
    bool run(uint64_t size, bool sends, bool receives, uint64_t met, BwResult *sent, BwResult *received) {
        const uint32_t nq = static_cast<uint32_t>(s_.res.qps.size());
        const bool timed = o_.duration > 0;
        const uint64_t per_qp = timed ? UINT64_MAX : o_.iters;
        std::vector<ibex_sge_t> sges(nq);
        std::vector<ibex_send_wr_t> wrs(nq);
        for (uint32_t q = 0; q < nq; ++q)
            wrs[q] = measured_wr(o_, s_.header.remote[q], s_.res.region(q), size, ibex_mr_lkey(s_.res.mr), &sges[q]);
        base_flags_ = size <= o_.inline_size ? IBEX_SEND_INLINE : 0;
        chains_.assign(nq, {});
        for (uint32_t q = 0; q < nq; ++q) chains_[q].assign(list_, wrs[q]);
        posted_.assign(nq, 0);
        completed_.assign(nq, 0);
        last_signaled_.assign(nq, UINT64_MAX);
        // The peak needs every post and signaled completion (-N: no peak, no stamps).
        const bool keep_times = sends && !timed && !o_.no_peak;
        gof_.assign(keep_times ? nq : 0, std::vector<uint64_t>(keep_times ? per_qp : 0));
        tposted_.clear();
        tcompleted_.clear();
        signaled_.clear();
        if (keep_times) {
            // Written now, so that no page of them is first touched (faulted in) inside
            // the timed loop.
            tposted_.assign(per_qp * nq, 0);
            tcompleted_.assign(per_qp * nq, 0);
            signaled_.reserve(per_qp * nq / cq_mod_ + nq);
        }
        size_t stamped = 0;
        received_ = 0;
        last_recv_ns_ = 0;
        uint64_t expected = receives && !timed ? per_qp * nq : UINT64_MAX; // timed: the sender says
        // A stock sender says nothing about how many it sent: a timed receiver facing one
        // stops on its own clock once arrivals have ceased.
        const bool own_clock = receives && timed && !s_.ibex_peer();
        bool peer_sent_known = !receives || !timed || own_clock;

        // Every post and signaled completion is stamped for the peak: with the cycle
        // counter, as perftest does, since a clock read per post (20-40 ns on a VM) was
        // most of an 8-byte post over shm and capped the message rate it measured.
        const TickClock ticks;
        const uint64_t start = now_ns();
        const uint64_t end = timed ? start + uint64_t(o_.duration) * 1000000000ull : 0;
        uint64_t total_posted = 0, first_post = 0;
        uint64_t interval_start = start, interval_completed = 0;
        bool stop = !sends;
        last_progress_ = start;
        for (uint64_t spin = 0;; ++spin) {
            if (!stop) {
                // Round robin over the QPs, each up to its depth, one list (-l) per call.
                for (uint32_t q = 0; q < nq; ++q) {
                    uint32_t n;
                    while ((n = next_list(q, per_qp)) != 0) {
                        const uint64_t k = posted_[q];
                        // Stamped before the post, as perftest does: a provider that
                        // moves the data inside the call (shm) has done the work by the
                        // time it returns.
                        const uint64_t tick = keep_times ? ticks.read() : 0;
                        if (!total_posted) first_post = now_ns();
                        if (!post_list(q, k, n, per_qp)) return false;
                        if (keep_times) {
                            for (uint32_t j = 0; j < n; ++j) {
                                gof_[q][k + j] = stamped;
                                tposted_[stamped++] = tick;
                            }
                        }
                        total_posted += n;
                    }
                }
                const uint64_t t = now_ns();
                bool all_posted = true;
                for (uint32_t q = 0; q < nq; ++q) all_posted &= posted_[q] == per_qp;
                if (all_posted || (timed && !o_.run_infinitely && t >= end) || (o_.run_infinitely && interrupted())) {
                    stop = true;
                    // The last message of every QP is signaled, so its end is seen.
                    for (uint32_t q = 0; q < nq && timed; ++q)
                        if (posted_[q] && last_signaled_[q] != posted_[q] - 1) {
                            if (!post_list(q, posted_[q], 1, per_qp, true)) return false;
                            ++total_posted;
                        }
                    if (timed && receives_on_peer() && s_.ibex_peer() &&
                        !s_.oob.send_msg("sent " + std::to_string(total_posted), &err))
                        return false;
                }
            }
            if (!poll(stop || !can_post(per_qp), ticks)) return false;
            const uint64_t t = now_ns();
            if (o_.run_infinitely && sends && !stop && t - interval_start >= uint64_t(o_.duration) * 1000000000ull) {
                const uint64_t done = completed_total();
                print_bw_line(s_.out(),
                              bw_result_avg(size, done - interval_completed, interval_start, t, o_.report_gbits));
                interval_start = t;
                interval_completed = done;
            }
            if (!peer_sent_known && (spin & 1023) == 1023) {
                std::string msg;
                const int r = s_.peek(&msg, "while receiving", &err);
                if (r < 0) return false;
                if (r > 0) {
                    uint64_t n = 0;
                    if (std::sscanf(msg.c_str(), "sent %" SCNu64, &n) != 1) {
                        err = "unexpected message from the peer: " + msg;
                        return false;
                    }
                    expected = n;
                    peer_sent_known = true;
                }
            }
            const bool send_done = stop && completed_total() == posted_total();
            const bool recv_done =
                !receives || (own_clock ? t >= end && t - std::max(last_recv_ns_, end) > kQuietNs
                                        : peer_sent_known && received_ >= expected);
            if (send_done && recv_done) break;
            if (t - last_progress_ > uint64_t(kStallTimeoutMs) * 1000000) {
                err = "no completion for " + std::to_string(kStallTimeoutMs / 1000) + " s (" +
                      std::to_string(posted_total() - completed_total()) + " operations outstanding, " +
                      std::to_string(received_) + " messages received); is the peer gone?";
                return false;
            }
        }

        *sent = BwResult{size, 0, 0, 0, 0};
        if (sends) {
            if (!keep_times) {
                *sent = bw_result_avg(size, posted_total(), first_post, last_completion_, o_.report_gbits);
            } else {
                std::sort(signaled_.begin(), signaled_.end());
                tposted_.resize(stamped);
                stamps_to_ns(ticks);
                *sent = bw_result(size, tposted_, tcompleted_, signaled_, o_.report_gbits);
            }
        }
        *received = BwResult{size, 0, 0, 0, 0};
        if (receives && received_) {
            // From this side's entry into the meeting (a receiver descheduled after it would
            // otherwise find the first messages already there and claim an impossible rate)
            // to the last arrival; arrivals taken in one poll share a timestamp, so no peak
            // is claimed.
            *received = bw_result_avg(size, received_, std::min(met, start), last_recv_ns_, o_.report_gbits);
        }
        return true;
    }

private:
    bool receives_on_peer() const { return o_.test.verb == Verb::send; }

    uint64_t posted_total() const {
        uint64_t n = 0;
        for (uint64_t p : posted_) n += p;
        return n;
    }
    uint64_t completed_total() const {
        uint64_t n = 0;
        for (uint64_t c : completed_) n += c;
        return n;
    }

    // How many requests QP q may post in its next call: a whole list (the rest of the
    // run at its end) when the depth has room for it, else 0.
    uint32_t next_list(uint32_t q, uint64_t per_qp) const {
        if (posted_[q] >= per_qp) return 0;
        const uint32_t n = static_cast<uint32_t>(std::min<uint64_t>(list_, per_qp - posted_[q]));
        return posted_[q] - completed_[q] + n <= depth_ ? n : 0;
    }

    // Requests k .. k+n-1 of QP q: one post, chained when n > 1. Every cq_mod-th request
    // and the run's last are signaled (with a list, cq_mod is its length: its last);
    // `close` signals the last one too (the end of a timed run).
    bool post_list(uint32_t q, uint64_t k, uint32_t n, uint64_t per_qp, bool close = false) {
        auto signaled = [&](uint64_t i) { return (i + 1) % cq_mod_ == 0 || i + 1 == per_qp || (close && i + 1 == k + n); };
        std::vector<ibex_send_wr_t> &chain = chains_[q];
        for (uint32_t j = 0; j < n; ++j) {
            chain[j].wr_id = (k + j) << 8 | q;
            chain[j].send_flags = base_flags_ | (signaled(k + j) ? IBEX_SEND_SIGNALED : 0);
            chain[j].next = j + 1 < n ? &chain[j + 1] : nullptr;
        }
        if (!post_send_one(s_.res.qps[q], chain[0], &err)) return false;
        for (uint32_t j = 0; j < n; ++j)
            if (signaled(k + j)) last_signaled_[q] = k + j;
        posted_[q] = k + n;
        return true;
    }

    bool post_recv(uint32_t q) {
        return post_recv_one(s_.res.qps[q], s_.res.region(q), s_.res.region_len, ibex_mr_lkey(s_.res.mr), kRecvTag | q,
                             &err);
    }

    bool can_post(uint64_t per_qp) const {
        for (uint32_t q = 0; q < posted_.size(); ++q)
            if (next_list(q, per_qp)) return true;
        return false;
    }

    // blocked: nothing more can be posted until something completes.
    bool poll(bool blocked, const TickClock &ticks) {
        // The runner spins anyway: drive the engine from here too rather than wait for the
        // progress thread to be scheduled (on a busy host it may not be for a while). With
        // -e it sleeps instead while blocked, leaving the CPU to the progress thread and
        // to whatever else runs there (the peer, on a small host).
        if (!o_.events) ibex_progress(s_.res.ctx);
        ibex_wc_t wc[kPollBatch];
        int n = 0;
        if (!poll_completions(s_.res.cq, kPollBatch, wc, &n, &err)) return false;
        if (!n && o_.events && blocked) {
            const ibex_status_t st = ibex_cq_wait(s_.res.cq, 100);
            if (st != IBEX_OK && st != IBEX_ERR_TIMEOUT) {
                err = std::string("waiting for a completion: ") + ibex_last_error();
                return false;
            }
            if (!poll_completions(s_.res.cq, kPollBatch, wc, &n, &err)) return false;
        }
        if (!n) return true;
        const uint64_t t = now_ns();
        last_progress_ = t;
        for (int i = 0; i < n; ++i) {
            if (wc[i].wr_id & kRecvTag) {
                ++received_;
                last_recv_ns_ = t;
                if (!post_recv(static_cast<uint32_t>(wc[i].wr_id & 0xff))) return false;
                continue;
            }
            const uint32_t q = static_cast<uint32_t>(wc[i].wr_id & 0xff);
            const uint64_t k = wc[i].wr_id >> 8;
            completed_[q] = k + 1;
            last_completion_ = t;
            if (!gof_.empty()) {
                const uint64_t g = gof_[q][k];
                tcompleted_[g] = ticks.read();
                signaled_.push_back(g);
            }
        }
        return true;
    }

    // The post and completion stamps in steady-clock nanoseconds, scaled in one go (only
    // signaled completions are stamped).
    void stamps_to_ns(const TickClock &ticks) {
        std::vector<uint64_t> all(tposted_);
        for (uint64_t g : signaled_) all.push_back(tcompleted_[g]);
        ticks.to_ns(all);
        std::copy(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(tposted_.size()), tposted_.begin());
        for (size_t i = 0; i < signaled_.size(); ++i) tcompleted_[signaled_[i]] = all[tposted_.size() + i];
    }

    Session &s_;
    const Options &o_;
    uint32_t depth_, cq_mod_, list_;
    unsigned base_flags_ = 0;                   // IBEX_SEND_INLINE up to -I
    std::vector<std::vector<ibex_send_wr_t>> chains_; // [qp]: a post list's requests (-l)
    std::vector<uint64_t> posted_, completed_, last_signaled_;
    std::vector<std::vector<uint64_t>> gof_; // [qp][k] -> global post index (iteration mode)
    std::vector<uint64_t> tposted_, tcompleted_, signaled_;
    uint64_t received_ = 0, last_recv_ns_ = 0;
    uint64_t last_completion_ = 0, last_progress_ = 0;
};

// Reports cross in perftest's binary form, in the unit each side prints.
bool swap_reports(Session &s, const BwResult &mine, BwResult *theirs, std::string *err) {
    WireReport w{mine.bytes, mine.iters, mine.peak, mine.avg, mine.msg_rate_mpps}, r;
    if (!s.oob.exchange_reports(s.client(), w, &r, err)) return false;
    *theirs = BwResult{r.size, r.iters, r.bw_peak, r.bw_avg, r.msg_rate};
    return true;
}

// Whether the peer is an ibex server that only serves and wants every row.
bool passive_peer(const Options &o, const Session &s) {
    return s.client() && s.ibex_peer() && !o.bidirectional && o.test.verb != Verb::send;
}

} // namespace

int run_bw(const Options &o) {
    const std::vector<uint64_t> sizes = run_sizes(o);
    const uint64_t max_size = *std::max_element(sizes.begin(), sizes.end());
    const bool timed = o.duration > 0;
    const uint32_t depth = static_cast<uint32_t>(std::min<uint64_t>(o.tx_depth, timed ? o.tx_depth : o.iters));
    const uint32_t list = std::min(o.post_list, depth);
    const uint32_t cq_mod = std::min(o.cq_mod, depth);
    const bool send = o.test.verb == Verb::send;
    if (o.run_infinitely && o.bidirectional) return fail(o, "--run_infinitely measures one direction: drop -b");
    if (o.run_infinitely) catch_interrupts();

    Session s(o);
    std::string err;
    ResourceSpec spec;
    spec.region = max_size;
    spec.num_qps = o.num_qps;
    spec.max_send_wr = depth + 1; // + the closing signaled WR of duration mode
    spec.max_recv_wr = send ? o.rx_depth : 1;
    if (!s.setup(spec, 0, cq_mod, &err)) return fail(s, err);
    FILE *out = s.out();

    // Who does what: the client always posts; the server posts only with -b; the
    // receiving side of a SEND test takes messages.
    const bool sends = s.client() || o.bidirectional;
    const bool receives = send && (!s.client() || o.bidirectional);
    BwFlow flow(s, depth, cq_mod, list);
    if (receives && !flow.post_receives()) return fail(s, flow.err);

    // The TCP exchange follows stock perftest's (see README.md): SEND tests meet before
    // every size (and after it with -a); the other verbs meet per size only with -b, and
    // otherwise the server waits in one barrier for the whole run and then takes the
    // client's report.
    print_bw_table_header(out, o.report_gbits);
    std::vector<BwResult> rows, local_rows, remote_rows;
    const bool passive = !sends && !send;
    auto record = [&](const BwResult &shown, const BwResult &mine, const BwResult &theirs) {
        print_bw_line(out, shown);
        rows.push_back(shown);
        local_rows.push_back(mine);
        remote_rows.push_back(theirs);
    };
    if (passive) {
        // An ibex client sends every row as it is measured; perftest's report carries only
        // the last one.
        for (size_t i = 0; i < sizes.size() && s.ibex_peer(); ++i) {
            std::string msg;
            BwResult r;
            if (!s.expect(&msg, -1, &err)) return fail(s, "waiting for the client: " + err);
            if (!from_msg(msg, &r)) return fail(s, "unexpected message from the client: " + msg);
            record(r, BwResult{r.bytes, 0, 0, 0, 0}, r);
        }
        BwResult theirs;
        if (!s.sync(-1, &err) || !swap_reports(s, BwResult{}, &theirs, &err))
            return fail(s, "waiting for the client: " + err);
        if (!s.ibex_peer()) record(theirs, BwResult{theirs.bytes, 0, 0, 0, 0}, theirs);
    } else {
        BwResult last;
        for (uint64_t size : sizes) {
            const std::string at = "size " + std::to_string(size) + ": ";
            const uint64_t met = now_ns();
            if ((o.bidirectional || send) && !s.sync(kPeerTimeoutMs, &err)) return fail(s, at + err);
            BwResult tx, rx;
            if (!flow.run(size, sends, receives, met, &tx, &rx)) return fail(s, at + flow.err);
            // perftest's -a loop of WRITE/READ meets again after each bidirectional run
            // (its single-size path and the atomic test do not).
            const bool write_or_read = o.test.verb == Verb::write || o.test.verb == Verb::read;
            if (o.bidirectional && write_or_read && o.all && !s.sync(kPeerTimeoutMs, &err)) return fail(s, at + err);
            // A SEND receiver reports what it received; everyone else what it sent.
            const BwResult mine = send && !sends ? rx : tx;
            BwResult theirs{size, 0, 0, 0, 0}, shown = mine;
            // perftest swaps reports after each size of a bidirectional run (a timed SEND
            // run excepted, unless both ends are ibex).
            if (o.bidirectional && (!send || !timed || s.ibex_peer())) {
                if (!swap_reports(s, mine, &theirs, &err)) return fail(s, at + err);
                shown = bw_sum(mine, theirs);
            }
            if (passive_peer(o, s) && !s.oob.send_msg(to_msg(mine), &err)) return fail(s, at + err);
            if (send && o.all && !s.sync(kPeerTimeoutMs, &err)) return fail(s, at + err);
            record(shown, mine, theirs);
            last = mine;
        }
        // The client of a one-way WRITE/READ/atomic test releases the waiting server and
        // hands it the last row.
        BwResult ignored;
        if (!o.bidirectional && !send && (!s.sync(kPeerTimeoutMs, &err) || !swap_reports(s, last, &ignored, &err)))
            return fail(s, "finishing: " + err);
    }
    std::fprintf(out, "%s", kResultLine);
    if (o.bidirectional && o.report_both) {
        for (int side = 0; side < 2; ++side) {
            std::fprintf(out, "\n %s results: \n%s", side ? "Remote" : "Local", kResultLine);
            print_bw_table_header(out, o.report_gbits);
            for (const BwResult &r : side ? remote_rows : local_rows) print_bw_line(out, r);
            std::fprintf(out, "%s", kResultLine);
        }
    }
    const CcReport cc = query_cc(s.res.ctx, s.res.qps);
    print_cc(out, cc);
    std::fflush(out);
    if (!s.finish(kPeerTimeoutMs, &err)) return fail(s, "finishing: " + err);
    if (o.json && !write_json(o, bw_json(o, s.header, rows, local_rows, remote_rows, cc), &err)) return fail(o, err);
    print_output(o, rows);
    if (const std::string missed = limits_missed(o, rows); !missed.empty()) return fail(o, missed);
    return 0;
}

} // namespace ibex::perftest
