#include "tools/ibex_perftest/session.h"

#include <arpa/inet.h>
#include <atomic>
#include <csignal>
#include <cstring>
#include <unistd.h>

#include "runtime/base/config.h"

namespace ibex::perftest {

namespace {

std::atomic<bool> g_interrupted{false};

void on_signal(int) { g_interrupted.store(true, std::memory_order_relaxed); }

// What both sides must agree on, or one of them would wait forever.
std::string params_text(const Options &o) {
    char b[200];
    std::snprintf(b, sizeof b, "params test=%s size=%llu all=%d iters=%llu duration=%d inf=%d mtu=%d qps=%u bidi=%d",
                  test_tag(o.test).c_str(), static_cast<unsigned long long>(o.size), o.all ? 1 : 0,
                  static_cast<unsigned long long>(o.duration ? 0 : o.iters), o.duration, o.run_infinitely ? 1 : 0, o.mtu,
                  o.num_qps, o.bidirectional ? 1 : 0);
    return b;
}

bool gid_is_v4_mapped(const uint8_t gid[16]) {
    static constexpr uint8_t kPrefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    return std::memcmp(gid, kPrefix, sizeof kPrefix) == 0;
}

uint32_t host_cache_line() {
    const long n = sysconf(_SC_LEVEL1_DCACHE_LINESIZE);
    return n > 0 ? static_cast<uint32_t>(n) : 64;
}

} // namespace

bool Session::meet_peer(std::string *err) {
    const std::string v = version_field();
    char in[kVersionFieldSize];
    if (!oob.xchg(client(), v.data(), in, sizeof in, kPeerTimeoutMs, err)) return false;
    peer = parse_version_field(in, sizeof in);
    if (!(peer.number >= kOldestPeerVersion)) {
        *err = "the peer's perftest version \"" + peer.text + "\" is older than " + std::string("5.70") +
               ", whose exchange ibex does not speak";
        return false;
    }
    // The cycle buffer (page size) and cache line size, as 32-bit integers in network
    // order; perftest takes the larger of each. ibex's buffers do not depend on them.
    const uint32_t sys[2] = {htonl(static_cast<uint32_t>(sysconf(_SC_PAGESIZE))), htonl(host_cache_line())};
    for (uint32_t mine : sys) {
        uint32_t theirs;
        if (!oob.xchg(client(), &mine, &theirs, sizeof theirs, kPeerTimeoutMs, err)) return false;
    }
    return true;
}

ibex_mtu_t Session::agree_mtu(std::string *err) {
    // Each side's MTU as the decimal digit of its enum (1 = 256 ... 5 = 4096) and a NUL;
    // both run the smaller, as perftest does.
    const int mine = o_.mtu ? static_cast<int>(mtu_enum(o_.mtu)) : static_cast<int>(res.local[0].mtu);
    char out[2] = {static_cast<char>('0' + mine), 0}, in[2];
    if (!oob.xchg(client(), out, in, sizeof in, kPeerTimeoutMs, err)) return static_cast<ibex_mtu_t>(0);
    const int theirs = in[0] - '0';
    const bool valid = in[1] == 0 && theirs >= IBEX_MTU_256 && theirs <= IBEX_MTU_4096;
    return static_cast<ibex_mtu_t>(valid && theirs < mine ? theirs : mine);
}

void catch_interrupts() {
    struct sigaction sa{};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, nullptr);
    sigaction(SIGTERM, &sa, nullptr);
}

bool interrupted() { return g_interrupted.load(std::memory_order_relaxed); }

std::vector<uint64_t> run_sizes(const Options &o) {
    std::vector<uint64_t> v;
    if (o.test.verb == Verb::atomic) v.push_back(kAtomicSize);
    else if (o.all)
        for (uint64_t s = kAllMinSize; s <= kAllMaxSize; s *= 2) v.push_back(s);
    else v.push_back(o.size);
    return v;
}

int fail(const Options &o, const std::string &msg) {
    std::fflush(stdout);
    std::fprintf(stderr, "%s: %s\n", tool_name(o.test).c_str(), msg.c_str());
    return 1;
}

int fail(Session &s, const std::string &msg) {
    std::string ignored;
    // A stock peer would take the text for its next message; it sees the connection
    // close instead.
    if (s.oob.fd() >= 0 && s.ibex_peer()) s.oob.send_msg("error: " + msg, &ignored);
    return fail(s.o_, msg);
}

Session::Session(const Options &o) : o_(o), out_(o.json && (o.json_path.empty() || o.json_path == "-") ? stderr : stdout) {
    // --output: stdout carries the figures alone.
    if (o.output != Output::table && (null_out_ = std::fopen("/dev/null", "w"))) out_ = null_out_;
}

Session::~Session() {
    if (null_out_) std::fclose(null_out_);
}

bool Session::expect(std::string *msg, int timeout_ms, std::string *err) {
    if (!oob.recv_msg(msg, timeout_ms, err)) return false;
    if (msg->rfind("error: ", 0) == 0) {
        *err = "the peer failed: " + msg->substr(7);
        return false;
    }
    return true;
}

int Session::peek(std::string *msg, const char *doing, std::string *err) {
    std::string e;
    const int r = oob.poll_msg(msg, &e);
    if (r < 0) *err = std::string(doing) + ": " + e;
    return r;
}

bool Session::setup(const ResourceSpec &spec_in, size_t remote_offset, uint32_t cq_mod, std::string *err) {
    ResourceSpec spec = spec_in;
    if (o_.use_cuda >= 0 && !cuda_usable(o_.use_cuda, err)) return false;
    numa = place_near_nic(o_.device, o_.numa);
    spec.numa_node = numa.node;
    spec.cuda_device = o_.use_cuda;
    spec.ibex_alloc = o_.ibex_alloc;
    // The device first: a bad -d fails at once, before any waiting.
    if (!res.open(o_.device, spec, err)) return false;
    // An engine without a progress thread moves only when this process calls ibex, also
    // while it meets the peer over TCP (between sizes, at the end). With a thread, the
    // tool keeps out of its way: its calls would count as the application polling and
    // send the thread to sleep.
    if (!ibex::config::get_bool("IBEX_PROGRESS_THREAD", true))
        oob.set_while_waiting([ctx = res.ctx] { ibex_progress(ctx); });

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

    if (!meet_peer(err)) return false;
    const ibex_mtu_t mtu = agree_mtu(err);
    if (!mtu) return false;

    if (ibex_peer()) {
        // ibex's own check: the same run on both sides, or a clear error on both.
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
    }

    // perftest's key records: the WRITE, READ and atomic latency tests swap QP 0's once
    // up front, every test swaps all QPs' before connecting and again after (the second
    // set is the one perftest prints), then QP 0's once more as the barrier after RTR.
    std::vector<KeyRecord> mine, theirs, again;
    for (uint32_t i = 0; i < spec.num_qps; ++i) mine.push_back(res.local_key(i, remote_offset));
    header.local = mine;
    if (!o_.is_bw() && o_.test.verb != Verb::send && !sync(kPeerTimeoutMs, err)) return false;
    if (!oob.exchange_keys(client(), mine, &theirs, err)) return false;
    if (gid_is_v4_mapped(mine[0].gid) != gid_is_v4_mapped(theirs[0].gid)) {
        *err = "the two sides' GIDs are of different types (one IPv4-mapped, one IPv6); use the same IP version";
        return false;
    }
    ConnectParams cp;
    cp.mtu_bytes = ibex_mtu_to_bytes(mtu);
    cp.out_reads = o_.out_reads;
    cp.traffic_class = o_.traffic_class;
    cp.sl = o_.sl;
    cp.timeout = o_.qp_timeout;
    for (uint32_t i = 0; i < spec.num_qps; ++i)
        if (!res.connect(i, theirs[i], cp, err)) return false;
    if (!oob.exchange_keys(client(), mine, &again, err)) return false;
    if (!sync(kPeerTimeoutMs, err)) return false;

    const bool sends = client() || o_.bidirectional; // this side posts the measured operations
    const bool rd_atomic = o_.test.verb == Verb::read || o_.test.verb == Verb::atomic;
    header.title = test_title(o_);
    header.device = ibex_context_device_name(res.ctx) ? ibex_context_device_name(res.ctx) : o_.device;
    header.num_qps = spec.num_qps;
    header.tx_depth = sends ? o_.tx_depth : 0;
    header.rx_depth = o_.test.verb == Verb::send && (!client() || o_.bidirectional) ? o_.rx_depth : 0;
    header.cq_mod = cq_mod;
    header.out_reads = rd_atomic ? o_.out_reads : 0;
    header.inline_size = o_.inline_size;
    header.post_list = o_.is_bw() ? o_.post_list : 1;
    header.traffic_class = res.traffic_class();
    header.sl = res.sl();
    header.mtu = res.path_mtu_bytes();
    header.numa = numa.summary;
    header.memory = o_.use_cuda >= 0 ? "GPU " + std::to_string(o_.use_cuda)
                    : o_.ibex_alloc  ? "host (ibex_mem_alloc)"
                                     : "host (--use_malloc)";
    header.remote = again;
    print_header(out_, header);
    return true;
}

} // namespace ibex::perftest
