// RDMA WRITE latency (ib_write_lat): a ping-pong in which each side polls the last byte of
// its receive buffer for the peer's write, then writes back. Samples are the times between
// consecutive posts (one round trip each), reported as half round trips.
#include <algorithm>
#include <atomic>

#include "ibex_perftest/perftest.h"
#include "ibex_perftest/session.h"

namespace ibex::perftest {

namespace {

class LatRun {
public:
    LatRun(Session &s, size_t recv_offset) : s_(s), recv_offset_(recv_offset) {}

    std::string err;

    bool run(uint64_t size, LatResult *out) {
        const Options &o = s_.o_;
        const bool server = o.is_server();
        const bool timed = o.duration > 0;
        const uint64_t iters = timed ? UINT64_MAX : o.iters;
        uint8_t *post_byte = s_.res.buf + size - 1;
        uint8_t *poll_byte = s_.res.buf + recv_offset_ + size - 1;

        ibex_sge_t sge{reinterpret_cast<uintptr_t>(s_.res.buf), static_cast<uint32_t>(size), ibex_mr_lkey(s_.res.mr)};
        ibex_send_wr_t wr{};
        wr.sg_list = &sge;
        wr.num_sge = 1;
        wr.opcode = IBEX_WR_RDMA_WRITE;
        wr.send_flags = IBEX_SEND_SIGNALED;
        wr.wr.rdma.remote_addr = s_.header.remote.vaddr;
        wr.wr.rdma.rkey = s_.header.remote.rkey;

        std::vector<uint64_t> tposted;
        tposted.reserve(timed ? 1 << 20 : iters);
        const uint64_t end_ns = timed ? now_ns() + uint64_t(o.duration) * 1000000000ull : 0;
        uint64_t scnt = 0, rcnt = 0;
        completed_ = 0;
        while (scnt < iters || rcnt < iters) {
            if (rcnt < iters && !(scnt == 0 && !server)) { // the client writes first
                bool peer_done = false;
                if (!wait_for(poll_byte, static_cast<uint8_t>(rcnt + 1), scnt, timed && server, &peer_done)) return false;
                if (peer_done) break; // duration mode: the client has stopped
                ++rcnt;
            }
            if (timed && !server && now_ns() >= end_ns) break;
            if (scnt < iters) {
                tposted.push_back(now_ns());
                std::atomic_ref<uint8_t>(*post_byte).store(static_cast<uint8_t>(++scnt), std::memory_order_relaxed);
                wr.wr_id = scnt;
                while (scnt - completed_ > kSqDepth - 1)
                    if (!poll_cq(scnt)) return false;
                const ibex_status_t st = ibex_post_send(s_.res.qp, &wr, nullptr);
                if (st != IBEX_OK) {
                    err = ibex_error("ibex_post_send", st);
                    return false;
                }
            }
        }
        // Every write of ours has landed before the next size (or the end).
        const uint64_t start = now_ns();
        while (completed_ < scnt) {
            if (!poll_cq(scnt)) return false;
            if (now_ns() - start > uint64_t(kStallTimeoutMs) * 1000000) {
                err = "writes not acknowledged for " + std::to_string(kStallTimeoutMs / 1000) + " s; is the peer gone?";
                return false;
            }
        }
        if (timed && !server) {
            std::string e;
            if (!s_.oob.send_msg("done", &e)) {
                err = e;
                return false;
            }
        }
        *out = lat_result(size, tposted, 2);
        return true;
    }

    static constexpr uint64_t kSqDepth = 64;

private:
    bool poll_cq(uint64_t posted) {
        ibex_wc_t wc[16];
        int n = 0;
        const ibex_status_t st = ibex_poll_cq(s_.res.cq, 16, wc, &n);
        if (st != IBEX_OK) {
            err = ibex_error("ibex_poll_cq", st);
            return false;
        }
        for (int i = 0; i < n; ++i) {
            if (wc[i].status != IBEX_WC_SUCCESS) {
                err = std::string("completion with error ") + ibex_wc_status_str(wc[i].status) + " (write " +
                      std::to_string(wc[i].wr_id) + " of " + std::to_string(posted) + ")";
                return false;
            }
            completed_ = wc[i].wr_id;
        }
        return true;
    }

    // Spins on the last byte of the receive buffer, driving the engine (the progress
    // thread stays off this core while the application polls). Every few thousand turns it
    // checks the clock (stall) and the TCP connection (peer gone, or "done").
    bool wait_for(uint8_t *byte, uint8_t want, uint64_t posted, bool accept_done, bool *peer_done) {
        std::atomic_ref<uint8_t> b(*byte);
        uint64_t since = 0;
        for (uint32_t spin = 0;; ++spin) {
            if (b.load(std::memory_order_acquire) == want) return true;
            ibex_progress(s_.res.ctx);
            if ((spin & 15) == 15 && !poll_cq(posted)) return false;
            if ((spin & 4095) == 4095) {
                const uint64_t t = now_ns();
                if (!since) since = t;
                std::string msg, e;
                const int r = s_.oob.poll_msg(&msg, &e);
                if (r < 0) {
                    err = "while waiting for the peer's write: " + e;
                    return false;
                }
                if (r > 0) {
                    if (accept_done && msg == "done") {
                        *peer_done = true;
                        return true;
                    }
                    err = "unexpected message from the peer: " + msg;
                    return false;
                }
                if (t - since > uint64_t(kStallTimeoutMs) * 1000000) {
                    err = "no write from the peer for " + std::to_string(kStallTimeoutMs / 1000) + " s";
                    return false;
                }
            }
        }
    }

    Session &s_;
    size_t recv_offset_;
    uint64_t completed_ = 0;
};

} // namespace

int write_lat_main(int argc, char **argv) {
    Options o;
    switch (parse_options(Test::write_lat, argc, argv, &o)) {
    case ParseResult::help: return 0;
    case ParseResult::error: return 1;
    case ParseResult::ok: break;
    }
    const std::vector<uint64_t> sizes = run_sizes(o);
    const uint64_t max_size = *std::max_element(sizes.begin(), sizes.end());
    // Send half [0, max) and receive half [max', 2 max'), page aligned; the key record
    // advertises the receive half, as perftest's does.
    const size_t half = (max_size + 4095) & ~size_t(4095);

    Session s(o);
    std::string err;
    if (!s.setup(2 * half, half, LatRun::kSqDepth, 0, &err)) return fail(o, err);
    FILE *out = s.out();
    std::vector<LatResult> rows;
    print_lat_table_header(out);
    LatRun run(s, half);
    for (uint64_t size : sizes) {
        LatResult r;
        if (!run.run(size, &r)) return fail(o, "size " + std::to_string(size) + ": " + run.err);
        print_lat_line(out, r);
        rows.push_back(r);
        if (!s.oob.barrier(s.client(), "size " + std::to_string(size), kPeerTimeoutMs, &err))
            return fail(o, "after size " + std::to_string(size) + ": " + err);
    }
    std::fprintf(out, "%s", kResultLine);
    print_counters(out, s.res.ctx);
    std::fflush(out);
    if (o.json && !write_json(o, lat_json(o, s.header, rows), &err)) return fail(o, err);
    return 0;
}

} // namespace ibex::perftest
