// Latency of every verb (ib_write_lat, ib_send_lat, ib_read_lat, ib_atomic_lat).
// WRITE and SEND are ping-pongs: each side waits for the peer's message (WRITE: the last
// byte of its receive area changing; SEND: a receive completion), then sends its own; the
// samples are the times between consecutive posts (one round trip each), reported as half
// round trips. READ and atomics are driven by the client alone: post one, wait for its
// completion, post the next; the samples are full round trips.
#include <algorithm>
#include <atomic>

#include "tools/ibex_perftest/ops.h"
#include "tools/ibex_perftest/perftest.h"
#include "tools/ibex_perftest/session.h"
#include "tools/ibex_perftest/ticks.h"

namespace ibex::perftest {

namespace {

inline void spin_pause() {
#if defined(__x86_64__)
    __builtin_ia32_pause();
#endif
}

// Sample stamps go into memory written before the timed loop: a page first touched inside
// it faults there (microseconds), on the path of whatever the peer sends meanwhile.
class Stamps {
public:
    Stamps(std::vector<uint64_t> *v, size_t expect) : v_(v) { v_->assign(expect, 0); }
    Stamps(const Stamps &) = delete;
    Stamps &operator=(const Stamps &) = delete;
    ~Stamps() { v_->resize(n_); }
    void add(uint64_t t) {
        if (n_ == v_->size()) v_->resize(2 * n_ + 1);
        (*v_)[n_++] = t;
    }

private:
    std::vector<uint64_t> *v_;
    size_t n_ = 0;
};

constexpr uint64_t kRecvTag = 1ull << 63;
constexpr uint64_t kSqDepth = 64;

class LatRun {
public:
    LatRun(Session &s, size_t recv_offset)
        : s_(s), o_(s.o_), recv_offset_(recv_offset),
          lands_by_itself_(!o_.device.starts_with("udp") && !o_.device.starts_with("dpdk")),
          drive_every_(lands_by_itself_ ? 63u : 7u) {}

    std::string err;

    // SEND ping-pong: rx-depth receives, each re-posted as it completes.
    bool post_receives() {
        for (uint32_t i = 0; i < o_.rx_depth; ++i)
            if (!post_recv()) return false;
        return true;
    }

    // samples: when not null, every sample (usec) in the order measured (-H, -U).
    bool run(uint64_t size, LatResult *out, std::vector<double> *samples) {
        const bool pingpong = o_.test.verb == Verb::write || o_.test.verb == Verb::send;
        std::vector<uint64_t> tposted;
        const TickClock clock;
        const bool ok = pingpong ? run_pingpong(size, clock, &tposted) : run_roundtrips(size, clock, &tposted);
        if (!ok) return false;
        clock.to_ns(tposted);
        *out = lat_result(size, tposted, pingpong ? 2 : 1);
        if (samples) *samples = lat_samples(tposted, pingpong ? 2 : 1);
        return true;
    }

private:
    ibex_send_wr_t make_wr(uint64_t size, ibex_sge_t *sge) const {
        // READ data and atomic results land in the receive area; writes and sends leave
        // from the start of the region.
        const bool lands_locally = o_.test.verb == Verb::read || o_.test.verb == Verb::atomic;
        ibex_send_wr_t wr = measured_wr(o_, s_.header.remote[0], s_.res.region(0) + (lands_locally ? recv_offset_ : 0),
                                        size, ibex_mr_lkey(s_.res.mr), sge);
        wr.send_flags = IBEX_SEND_SIGNALED | (size <= o_.inline_size ? IBEX_SEND_INLINE : 0);
        return wr;
    }

    bool post(ibex_send_wr_t &wr, uint64_t id) {
        wr.wr_id = id;
        return post_send_one(s_.res.qps[0], wr, &err);
    }

    bool post_recv() {
        return post_recv_one(s_.res.qps[0], s_.res.region(0) + recv_offset_, s_.res.region_len - recv_offset_,
                             ibex_mr_lkey(s_.res.mr), kRecvTag, &err);
    }

    // Takes completions: our sends (completed_ = the last id) and, for SEND, the peer's
    // messages (received_, each receive re-posted).
    bool poll_cq() {
        ibex_wc_t wc[16];
        int n = 0;
        if (!poll_completions(s_.res.cq, 16, wc, &n, &err)) return false;
        for (int i = 0; i < n; ++i) {
            if (wc[i].wr_id & kRecvTag) {
                ++received_;
                if (!post_recv()) return false;
            } else {
                completed_ = wc[i].wr_id;
            }
        }
        return true;
    }

    // Spins until the peer's message number `want` has arrived, driving the engine (the
    // progress thread stays off this core while the application polls). Every few
    // thousand turns it checks the clock (stall) and the TCP connection (peer gone, or
    // "done" when accept_done).
    bool wait_peer(uint64_t want, bool accept_done, bool *peer_done) {
        const bool by_byte = o_.test.verb == Verb::write;
        std::atomic_ref<uint8_t> b(*(s_.res.region(0) + recv_offset_ + size_ - 1));
        uint64_t since = 0;
        // A WRITE's turns are a few nanoseconds: the clock and the connection are looked
        // at as rarely in time as on the other verbs' turns.
        const uint32_t check_mask = by_byte ? 32767 : 4095;
        for (uint32_t spin = 0;; ++spin) {
            if (by_byte ? b.load(std::memory_order_acquire) == static_cast<uint8_t>(want) : received_ >= want) return true;
            // WRITE: the byte is watched on every turn and the engine driven on every
            // eighth (every 64th where the byte lands by itself: there the engine only has
            // completions to take, and a progress call is the context's lock), a few
            // nanoseconds apart, so a byte that lands is seen at once rather than after a
            // progress call. Where the byte lands without this
            // thread's help (shm: the peer's copy; an RNIC: its DMA), the looks are paced
            // by the CPU's spin-wait hint: without it the core leaves the loop through a
            // memory-order pipeline flush when the byte changes (shm, 8 B: 0.07-0.08 us
            // without it, 0.06 with it, half round trips on this VM). The soft ports land
            // it in the progress call, which pauses would only delay (udp:lo, 2 B: +1.5%).
            if (by_byte && (spin & drive_every_) != drive_every_) {
                if (lands_by_itself_) spin_pause();
                continue;
            }
            ibex_progress(s_.res.ctx);
            if ((!by_byte || (spin & 127) == 127) && !poll_cq()) return false;
            if ((spin & check_mask) == check_mask) {
                const uint64_t t = now_ns();
                if (!since) since = t;
                std::string msg;
                const int r = s_.peek(&msg, "while waiting for the peer", &err);
                // A stock peer says nothing when its time is up; it just goes.
                if (r < 0 && accept_done && !s_.ibex_peer()) {
                    *peer_done = true;
                    return true;
                }
                if (r < 0) return false;
                if (r > 0) {
                    if (accept_done && msg == "done") {
                        *peer_done = true;
                        return true;
                    }
                    err = "unexpected message from the peer: " + msg;
                    return false;
                }
                if (t - since > uint64_t(kStallTimeoutMs) * 1000000) {
                    err = "no message from the peer for " + std::to_string(kStallTimeoutMs / 1000) + " s";
                    return false;
                }
            }
        }
    }

    bool drain_sends(uint64_t posted) {
        uint64_t start = 0;
        // The clock is read every few thousand polls only: at the READ and atomic round
        // trips' scale a read per poll would be part of the measured time.
        for (uint32_t spin = 0; completed_ < posted; ++spin) {
            if (!poll_cq()) return false;
            if ((spin & 4095) != 4095) continue;
            if (!start) start = now_ns();
            if (now_ns() - start > uint64_t(kStallTimeoutMs) * 1000000) {
                err = "operations not completed for " + std::to_string(kStallTimeoutMs / 1000) + " s; is the peer gone?";
                return false;
            }
        }
        return true;
    }

    bool run_pingpong(uint64_t size, const TickClock &clock, std::vector<uint64_t> *tposted) {
        const bool server = o_.is_server();
        const bool timed = o_.duration > 0;
        const uint64_t iters = timed ? UINT64_MAX : o_.iters;
        size_ = size;
        uint8_t *post_byte = s_.res.region(0) + size - 1;
        ibex_sge_t sge;
        ibex_send_wr_t wr = make_wr(size, &sge);
        Stamps stamps(tposted, timed ? 1 << 20 : iters);
        const uint64_t end_ns = timed ? now_ns() + uint64_t(o_.duration) * 1000000000ull : 0;
        uint64_t scnt = 0, rcnt = 0;
        const uint64_t recv_base = received_;
        completed_ = 0;
        while (scnt < iters || rcnt < iters) {
            if (rcnt < iters && !(scnt == 0 && !server)) { // the client sends first
                bool peer_done = false;
                const uint64_t want = o_.test.verb == Verb::write ? rcnt + 1 : recv_base + rcnt + 1;
                if (!wait_peer(want, timed && server, &peer_done)) return false;
                if (peer_done) break; // duration mode: the client has stopped
                ++rcnt;
            }
            if (timed && !server && now_ns() >= end_ns) break;
            if (scnt < iters) {
                ++scnt;
                // WRITE carries the count in its last byte for the peer to poll; a SEND's
                // payload is never looked at (and may be GPU memory).
                if (o_.test.verb == Verb::write)
                    std::atomic_ref<uint8_t>(*post_byte).store(static_cast<uint8_t>(scnt), std::memory_order_relaxed);
                while (scnt - completed_ > kSqDepth - 1)
                    if (!poll_cq()) return false;
                if (!post(wr, scnt)) return false;
                // As perftest does, the send's completion is reaped right after the post,
                // while the peer answers, not between the peer's byte and our reply. One
                // pass only: an engine that completes on the peer's ACK (soft) is reaped
                // before the next post instead, as above.
                if (!poll_cq()) return false;
                // Stamped after the post, while the peer answers: a sample is still one
                // round trip (post to post), and the stamp stays off the path from the
                // peer's byte to our reply.
                stamps.add(clock.read());
            }
        }
        // Every message of ours has landed before the next size (or the end).
        if (!drain_sends(scnt)) return false;
        if (timed && !server && s_.ibex_peer() && !s_.oob.send_msg("done", &err)) return false;
        return true;
    }

    bool run_roundtrips(uint64_t size, const TickClock &clock, std::vector<uint64_t> *tposted) {
        const bool timed = o_.duration > 0;
        const uint64_t iters = timed ? UINT64_MAX : o_.iters;
        ibex_sge_t sge;
        ibex_send_wr_t wr = make_wr(size, &sge);
        Stamps stamps(tposted, timed ? 1 << 20 : iters);
        const uint64_t end_ns = timed ? now_ns() + uint64_t(o_.duration) * 1000000000ull : 0;
        completed_ = 0;
        for (uint64_t n = 1; n <= iters; ++n) {
            if (timed && now_ns() >= end_ns) break;
            stamps.add(clock.read());
            if (!post(wr, n) || !drain_sends(n)) return false;
        }
        return true;
    }

    Session &s_;
    const Options &o_;
    size_t recv_offset_;
    bool lands_by_itself_; // a WRITE's bytes arrive without this thread driving the engine
    uint32_t drive_every_;  // mask: a WRITE ping-pong drives the engine when spin & it is all ones
    uint64_t size_ = 0;
    uint64_t completed_ = 0;
    uint64_t received_ = 0;
};

} // namespace

int run_lat(const Options &o) {
    if (o.use_cuda >= 0 && o.test.verb == Verb::write)
        return fail(o, "--use_cuda: the WRITE ping-pong polls its buffer from the CPU; use ibex_write_bw, "
                       "ibex_read_lat or ibex_send_lat for GPU buffers");
    const std::vector<uint64_t> sizes = run_sizes(o);
    const uint64_t max_size = *std::max_element(sizes.begin(), sizes.end());
    // Send half [0, max) and receive half [max', 2 max'), page aligned; the key record
    // advertises the receive half, as perftest's does.
    const size_t half = (max_size + 4095) & ~size_t(4095);
    const bool pingpong = o.test.verb == Verb::write || o.test.verb == Verb::send;

    Session s(o);
    std::string err;
    ResourceSpec spec;
    spec.region = 2 * half;
    spec.max_send_wr = kSqDepth;
    spec.max_recv_wr = o.test.verb == Verb::send ? o.rx_depth : 1;
    if (!s.setup(spec, half, 0, &err)) return fail(s, err);
    FILE *out = s.out();
    LatRun run(s, half);
    if (o.test.verb == Verb::send && !run.post_receives()) return fail(s, run.err);

    // The TCP exchange follows stock perftest's (see README.md): SEND meets before every
    // size (receives are in place before the first message), WRITE not at all; the READ
    // and atomic server waits in perftest's closing exchange while the client measures.
    std::vector<LatResult> rows;
    print_lat_table_header(out);
    auto record = [&](const LatResult &r) {
        print_lat_line(out, r);
        rows.push_back(r);
    };
    if (!pingpong && !s.client()) {
        // An ibex client sends its rows, so that this side shows them too; perftest's
        // server shows none.
        for (size_t i = 0; i < sizes.size() && s.ibex_peer(); ++i) {
            std::string msg;
            LatResult r;
            if (!s.expect(&msg, -1, &err)) return fail(s, "waiting for the client: " + err);
            if (!from_msg(msg, &r)) return fail(s, "unexpected message from the client: " + msg);
            record(r);
        }
        if (!s.finish(-1, &err)) return fail(s, "waiting for the client: " + err);
    } else {
        for (uint64_t size : sizes) {
            const std::string at = "size " + std::to_string(size) + ": ";
            if (o.test.verb == Verb::send && !s.sync(kPeerTimeoutMs, &err)) return fail(s, at + err);
            LatResult r;
            std::vector<double> samples;
            if (!run.run(size, &r, o.histogram != Histogram::none ? &samples : nullptr)) return fail(s, at + run.err);
            if (o.histogram != Histogram::none) print_lat_histogram(out, samples, o.histogram == Histogram::unsorted);
            if (!pingpong && s.ibex_peer() && !s.oob.send_msg(to_msg(r), &err)) return fail(s, at + err);
            record(r);
        }
        // perftest's WRITE latency test closes without a word; two ibex tools still meet
        // once more, so neither leaves while its engine may owe the other an ACK.
        if ((o.test.verb != Verb::write || s.ibex_peer()) && !s.finish(kPeerTimeoutMs, &err))
            return fail(s, "finishing: " + err);
    }
    std::fprintf(out, "%s", kResultLine);
    const CcReport cc = query_cc(s.res.ctx, s.res.qps);
    print_cc(out, cc);
    std::fflush(out);
    if (o.json && !write_json(o, lat_json(o, s.header, rows, cc), &err)) return fail(o, err);
    print_output(o, rows);
    return 0;
}

} // namespace ibex::perftest
