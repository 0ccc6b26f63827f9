#include "ibex_perftest/session.h"

#include <cinttypes>

#include "runtime/config.h"

namespace ibex::perftest {

std::vector<uint64_t> run_sizes(const Options &o) {
    std::vector<uint64_t> v;
    if (o.all) {
        for (uint64_t s = kAllMinSize; s <= kAllMaxSize; s *= 2) v.push_back(s);
    } else {
        v.push_back(o.size);
    }
    return v;
}

void print_counters(FILE *out, ibex_context_t *ctx) {
    if (!ibex::config::get_bool("IBEX_PERFTEST_COUNTERS", false)) return;
    ibex_counters_t c{};
    c.size = sizeof c;
    if (ibex_query_counters(ctx, &c) != IBEX_OK) return;
    std::fprintf(out,
                 " counters: tx_packets %" PRIu64 " rx_packets %" PRIu64 " retransmitted %" PRIu64
                 " ack_timeouts %" PRIu64 " seq_naks %" PRIu64 " out_of_sequence %" PRIu64 " duplicates %" PRIu64
                 " icrc_errors %" PRIu64 " ecn_marked %" PRIu64 " cnp_sent %" PRIu64 "\n",
                 c.tx_packets, c.rx_packets, c.retransmitted_packets, c.local_ack_timeout_err, c.packet_seq_err,
                 c.out_of_sequence, c.duplicate_request, c.rx_icrc_errors, c.np_ecn_marked_roce_packets, c.np_cnp_sent);
}

int fail(const Options &o, const std::string &msg) {
    std::fflush(stdout);
    std::fprintf(stderr, "%s: %s\n", tool_name(o.test), msg.c_str());
    return 1;
}

Session::Session(const Options &o) : o_(o), out_(o.json && (o.json_path.empty() || o.json_path == "-") ? stderr : stdout) {}

namespace {

std::string params_text(const Options &o) {
    char b[160];
    std::snprintf(b, sizeof b, "params test=%s size=%llu all=%d iters=%llu duration=%d mtu=%d",
                  o.is_bw() ? "write_bw" : "write_lat", static_cast<unsigned long long>(o.size), o.all ? 1 : 0,
                  static_cast<unsigned long long>(o.duration ? 0 : o.iters), o.duration, o.mtu);
    return b;
}

} // namespace

bool Session::setup(size_t buf_len, size_t remote_offset, uint32_t max_send_wr, uint32_t cq_mod, std::string *err) {
    // The device first: a bad -d fails at once, before any waiting.
    if (!res.open(o_.device, buf_len, max_send_wr, err)) return false;

    if (o_.is_server()) {
        if (!oob.listen(o_.port, err)) return false;
        std::fprintf(out_, "\n************************************\n"
                           "* Waiting for client to connect... *\n"
                           "************************************\n");
        std::fflush(out_);
        if (!oob.accept(err)) return false;
    } else if (!oob.connect(o_.server, o_.port, kConnectTimeoutMs, err)) {
        return false;
    }

    const KeyRecord mine = res.local_key(remote_offset);
    KeyRecord theirs;
    if (!oob.exchange_keys(client(), mine, &theirs, err)) return false;

    // Both sides must run the same test, or one of them would wait forever.
    const std::string p = params_text(o_);
    std::string reply;
    if (client()) {
        if (!oob.send_msg(p, err) || !oob.recv_msg(&reply, kPeerTimeoutMs, err)) return false;
        if (reply != "ok") {
            *err = "the server runs different parameters (" + reply + "; this client has " + p + ")";
            return false;
        }
    } else {
        if (!oob.recv_msg(&reply, kPeerTimeoutMs, err)) return false;
        const bool same = reply == p;
        if (!oob.send_msg(same ? "ok" : p, err)) return false;
        if (!same) {
            *err = "the client runs different parameters (" + reply + "; this server has " + p + ")";
            return false;
        }
    }

    if (!res.connect(theirs, o_.mtu, err)) return false;
    // Both QPs are ready to receive before anything is sent.
    if (!oob.barrier(client(), "ready", kPeerTimeoutMs, err)) return false;

    header.title = o_.is_bw() ? "RDMA_Write BW Test" : "RDMA_Write Latency Test";
    header.device = ibex_context_device_name(res.ctx) ? ibex_context_device_name(res.ctx) : o_.device;
    header.tx_depth = o_.tx_depth;
    header.cq_mod = cq_mod;
    header.mtu = res.path_mtu_bytes();
    header.local = mine;
    header.remote = theirs;
    print_header(out_, header);
    return true;
}

} // namespace ibex::perftest
