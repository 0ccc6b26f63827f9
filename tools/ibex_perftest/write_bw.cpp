// RDMA WRITE bandwidth (ib_write_bw): the client keeps tx-depth writes in flight with CQ
// moderation and measures; the server only waits on TCP for the client's "done".
#include <algorithm>

#include "ibex_perftest/perftest.h"
#include "ibex_perftest/session.h"

namespace ibex::perftest {

namespace {

struct BwRun {
    Session &s;
    uint32_t depth;
    uint32_t cq_mod;
    std::string err;
    uint64_t last_seen = 0; // last completion (or start), for the stall check

    bool drain(uint64_t *completed, uint64_t posted, std::vector<uint64_t> *tcompleted, uint64_t *last_ns,
               bool wait_all) {
        ibex_wc_t wc[32];
        do {
            int n = 0;
            const ibex_status_t st = ibex_poll_cq(s.res.cq, 32, wc, &n);
            if (st != IBEX_OK) {
                err = ibex_error("ibex_poll_cq", st);
                return false;
            }
            const uint64_t t = now_ns();
            for (int i = 0; i < n; ++i) {
                if (wc[i].status != IBEX_WC_SUCCESS) {
                    err = std::string("completion with error ") + ibex_wc_status_str(wc[i].status) + " (message " +
                          std::to_string(wc[i].wr_id) + ")";
                    return false;
                }
                *completed = wc[i].wr_id + 1;
                if (tcompleted) (*tcompleted)[wc[i].wr_id] = t;
                *last_ns = t;
            }
            if (n) {
                last_seen = t;
            } else if (t - last_seen > uint64_t(kStallTimeoutMs) * 1000000) {
                err = "no completion for " + std::to_string(kStallTimeoutMs / 1000) + " s (" +
                      std::to_string(posted - *completed) + " writes outstanding); is the peer gone?";
                return false;
            }
            if (!wait_all) return true;
        } while (*completed < posted);
        return true;
    }

    bool run(uint64_t size, BwResult *out) {
        const Options &o = s.o_;
        ibex_sge_t sge{reinterpret_cast<uintptr_t>(s.res.buf), static_cast<uint32_t>(size), ibex_mr_lkey(s.res.mr)};
        ibex_send_wr_t wr{};
        wr.sg_list = &sge;
        wr.num_sge = 1;
        wr.opcode = IBEX_WR_RDMA_WRITE;
        wr.wr.rdma.remote_addr = s.header.remote.vaddr;
        wr.wr.rdma.rkey = s.header.remote.rkey;

        const bool timed = o.duration > 0;
        const uint64_t iters = timed ? UINT64_MAX : o.iters;
        std::vector<uint64_t> tposted, tcompleted;
        if (!timed) {
            tposted.assign(iters, 0);
            tcompleted.assign(iters, 0);
        }
        const uint64_t end_ns = timed ? now_ns() + uint64_t(o.duration) * 1000000000ull : 0;
        uint64_t posted = 0, completed = 0, first_post = 0, last_completion = 0;
        bool stop = false;
        last_seen = now_ns();
        while (!stop || completed < posted) {
            while (!stop && posted < iters && posted - completed < depth) {
                const uint64_t t = now_ns();
                if (timed && t >= end_ns) {
                    stop = true;
                    break;
                }
                const bool last = posted + 1 == iters;
                wr.wr_id = posted;
                wr.send_flags = ((posted + 1) % cq_mod == 0 || last) ? IBEX_SEND_SIGNALED : 0;
                if (!timed) tposted[posted] = t;
                if (!posted) first_post = t;
                ibex_send_wr_t *bad = nullptr;
                const ibex_status_t st = ibex_post_send(s.res.qp, &wr, &bad);
                if (st != IBEX_OK) {
                    err = ibex_error("ibex_post_send", st);
                    return false;
                }
                ++posted;
                if (last) stop = true;
            }
            if (stop && timed && posted && (posted % cq_mod) != 0) {
                // Duration mode: the last write must be signaled to know when it finished.
                wr.wr_id = posted;
                wr.send_flags = IBEX_SEND_SIGNALED;
                const ibex_status_t st = ibex_post_send(s.res.qp, &wr, nullptr);
                if (st != IBEX_OK) {
                    err = ibex_error("ibex_post_send", st);
                    return false;
                }
                ++posted;
            }
            if (!drain(&completed, posted, timed ? nullptr : &tcompleted, &last_completion, stop)) return false;
        }
        if (timed)
            *out = bw_result_avg(size, posted, first_post, last_completion, o.report_gbits);
        else
            *out = bw_result(size, iters, tposted, tcompleted, cq_mod, o.report_gbits, true);
        return true;
    }
};

} // namespace

int write_bw_main(int argc, char **argv) {
    Options o;
    switch (parse_options(Test::write_bw, argc, argv, &o)) {
    case ParseResult::help: return 0;
    case ParseResult::error: return 1;
    case ParseResult::ok: break;
    }
    const std::vector<uint64_t> sizes = run_sizes(o);
    const uint64_t max_size = *std::max_element(sizes.begin(), sizes.end());
    const uint32_t depth = static_cast<uint32_t>(std::min<uint64_t>(o.tx_depth, o.duration ? o.tx_depth : o.iters));
    const uint32_t cq_mod = std::min(kCqModeration, depth);

    Session s(o);
    std::string err;
    if (!s.setup(max_size, 0, depth + 1, cq_mod, &err)) return fail(o, err);
    FILE *out = s.out();
    std::vector<BwResult> rows;

    if (o.is_server()) {
        // perftest's server reports nothing unless asked: it waits for the client.
        print_bw_table_header(out, o.report_gbits);
        std::string msg;
        if (!s.oob.recv_msg(&msg, -1, &err)) return fail(o, "waiting for the client: " + err);
        if (msg.rfind("error", 0) == 0) return fail(o, "the client failed: " + msg);
        if (msg != "done") return fail(o, "unexpected message from the client: " + msg);
        if (!s.oob.send_msg("done", &err)) return fail(o, err);
        std::fprintf(out, "%s", kResultLine);
        print_counters(out, s.res.ctx);
    } else {
        print_bw_table_header(out, o.report_gbits);
        BwRun run{s, depth, cq_mod, {}};
        for (uint64_t size : sizes) {
            BwResult r;
            if (!run.run(size, &r)) {
                s.oob.send_msg("error: " + run.err, &err);
                return fail(o, "size " + std::to_string(size) + ": " + run.err);
            }
            print_bw_line(out, r);
            rows.push_back(r);
        }
        std::fprintf(out, "%s", kResultLine);
        print_counters(out, s.res.ctx);
        std::string msg;
        if (!s.oob.send_msg("done", &err) || !s.oob.recv_msg(&msg, kPeerTimeoutMs, &err))
            return fail(o, "finishing with the server: " + err);
    }
    std::fflush(out);
    if (o.json && !write_json(o, bw_json(o, s.header, rows), &err)) return fail(o, err);
    return 0;
}

} // namespace ibex::perftest
