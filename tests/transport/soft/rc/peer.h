// A remote RC peer in a forked child process, driven over a socketpair.
//
// The child opens its own context on test_device() ("udp:lo": its own 127.0.0.x:4791), registers one
// buffer, sends the parent its endpoint address (ibex_ep_addr_pack), buffer VA and rkey,
// connects to the parent's address, and then serves commands: fill or verify buffer
// ranges bit for bit against a seeded pattern, return bytes, post receives, report
// completions and counters, run a receive loop that checks every incoming SEND. The
// child's engine answers WRITE/READ/atomic requests by itself (progress thread).
#pragma once

#include <gtest/gtest.h>
#include <ibex/ibex.h>

#include <algorithm>
#include <fcntl.h>
#include <memory>
#include <sched.h>
#include <string>
#include <vector>

#include "tests/support/bridged_hosts.h"
#include "tests/support/child_process.h"
#include "tests/support/endpoint.h"

namespace ibex::test {

// ---------------------------------------------------------------- data patterns

inline uint64_t splitmix64(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

// Byte i of the message with this seed: position-dependent, so shifted, repeated or
// misplaced data never matches.
inline uint8_t pattern_byte(uint64_t seed, uint64_t i) {
    return static_cast<uint8_t>(splitmix64((seed << 40) ^ (i >> 3) ^ (seed >> 24)) >> (8 * (i & 7)));
}

// Writes message bytes [start, start + len) of pattern `seed` to p.
inline void fill_pattern(uint8_t *p, size_t len, uint64_t seed, uint64_t start = 0) {
    size_t i = 0;
    while (i < len && ((start + i) & 7)) {
        p[i] = pattern_byte(seed, start + i);
        ++i;
    }
    for (; i + 8 <= len; i += 8) {
        const uint64_t w = splitmix64((seed << 40) ^ ((start + i) >> 3) ^ (seed >> 24));
        std::memcpy(p + i, &w, 8); // little-endian host: byte k of w is pattern byte k
    }
    for (; i < len; ++i) p[i] = pattern_byte(seed, start + i);
}

// Counts bytes of p that differ from the pattern; *first gets the first bad offset.
inline uint64_t check_pattern(const uint8_t *p, size_t len, uint64_t seed, uint64_t start = 0,
                              uint64_t *first = nullptr) {
    uint64_t bad = 0;
    for (size_t i = 0; i < len; ++i) {
        if (p[i] != pattern_byte(seed, start + i)) {
            if (!bad && first) *first = i;
            ++bad;
        }
    }
    return bad;
}

inline uint64_t check_const(const uint8_t *p, size_t len, uint8_t v, uint64_t *first = nullptr) {
    uint64_t bad = 0;
    for (size_t i = 0; i < len; ++i) {
        if (p[i] != v) {
            if (!bad && first) *first = i;
            ++bad;
        }
    }
    return bad;
}

// ---------------------------------------------------------------- protocol

struct PeerConfig {
    size_t buf_bytes = 1 << 20;
    uint32_t max_send_wr = 256;
    uint32_t max_recv_wr = 1024;
    int cqe = 8192;
    bool faults = false;
    ibex_fault_config_t fault_cfg = IBEX_FAULT_CONFIG_INIT;
    int timeout = -1;       // QP timeout code to set after connecting (-1: leave)
    int min_rnr_timer = -1; // responder's RNR timer code (-1: leave)
    unsigned max_seconds = 60;
    std::string device;     // empty: test_device()
    std::string netns;      // non-empty: the child joins /run/netns/<netns> before opening
    std::string retransmit; // non-empty: the child's IBEX_RETRANSMIT (gbn, selective)
};

struct PeerHello {
    uint8_t addr[IBEX_EP_ADDR_WIRE_LEN];
    uint32_t rkey;
    uint64_t va;
    uint64_t len;
    int64_t status; // 0: the child's endpoint is up
};

struct PeerCmd {
    enum Op : uint32_t {
        kFillPattern = 1,
        kFillConst,
        kVerifyPattern,
        kVerifyConst,
        kGetBytes,
        kPostRecv,
        kWaitRecv,
        kCounters,
        kRecvLoop,
        kExit,
    };
    uint32_t op = 0;
    uint32_t n = 0;
    uint64_t a = 0, b = 0, c = 0, d = 0, e = 0;
};

struct PeerReply {
    int64_t rc = 0;
    uint64_t v[4] = {};
};

struct RecvRecord {
    uint32_t status;
    uint32_t byte_len;
    uint32_t imm;
    uint32_t flags;
    uint32_t opcode;
    uint32_t mismatches; // data bytes that differ from the expected pattern
};

struct SgeDesc {
    uint64_t off;
    uint64_t len;
};

// ---------------------------------------------------------------- the child

namespace peer_detail {

// Moves the calling thread into a named network namespace (ip netns add <name>).
inline bool join_netns(const std::string &name) { return enter_netns(name); }

inline int serve(int fd, const PeerConfig &cfg) {
    if (!cfg.netns.empty() && !join_netns(cfg.netns)) return 14;
    if (!cfg.retransmit.empty()) setenv("IBEX_RETRANSMIT", cfg.retransmit.c_str(), 1);
    Endpoint ep;
    ep.max_send_wr = cfg.max_send_wr;
    ep.max_recv_wr = cfg.max_recv_wr;
    ep.open(cfg.buf_bytes, cfg.device.empty() ? test_device() : cfg.device.c_str(), cfg.cqe);
    PeerHello hello{};
    hello.status = ep.ok() ? 0 : 1;
    if (ep.ok()) {
        ibex_ep_addr_t a = ep.addr();
        if (ibex_ep_addr_pack(&a, hello.addr, sizeof hello.addr) != IBEX_OK) hello.status = 2;
        hello.rkey = ibex_mr_rkey(ep.mr);
        hello.va = ep.va();
        hello.len = ep.buf.size();
    }
    if (!send_all(fd, &hello, sizeof hello) || hello.status) return 2;
    uint8_t wire[IBEX_EP_ADDR_WIRE_LEN];
    if (!recv_all(fd, wire, sizeof wire)) return 3;
    PeerReply ready;
    ibex_ep_addr_t remote;
    ibex_status_t st = ibex_ep_addr_unpack(wire, sizeof wire, &remote);
    if (cfg.timeout >= 0) ep.choose_timers(static_cast<uint8_t>(cfg.timeout), 7, 7);
    if (st == IBEX_OK) st = ep.connect(remote);
    if (st == IBEX_OK && cfg.min_rnr_timer >= 0) st = ep.set_min_rnr_timer(static_cast<uint8_t>(cfg.min_rnr_timer));
    if (st == IBEX_OK && cfg.faults) st = ibex_set_faults(ep.ctx, &cfg.fault_cfg);
    ready.rc = st;
    if (!send_all(fd, &ready, sizeof ready) || st != IBEX_OK) return 4;

    auto in_buf = [&](uint64_t off, uint64_t len) { return off <= ep.buf.size() && len <= ep.buf.size() - off; };
    for (;;) {
        PeerCmd c;
        if (!recv_all(fd, &c, sizeof c, 120000)) return 5;
        PeerReply r;
        switch (c.op) {
        case PeerCmd::kFillPattern:
        case PeerCmd::kFillConst:
            if (!in_buf(c.a, c.b)) {
                r.rc = -1;
                break;
            }
            if (c.op == PeerCmd::kFillPattern)
                fill_pattern(ep.buf.data() + c.a, c.b, c.c, c.d);
            else
                std::memset(ep.buf.data() + c.a, static_cast<int>(c.c), c.b);
            break;
        case PeerCmd::kVerifyPattern:
        case PeerCmd::kVerifyConst:
            if (!in_buf(c.a, c.b)) {
                r.rc = -1;
                break;
            }
            r.rc = static_cast<int64_t>(c.op == PeerCmd::kVerifyPattern
                                            ? check_pattern(ep.buf.data() + c.a, c.b, c.c, c.d, &r.v[0])
                                            : check_const(ep.buf.data() + c.a, c.b, static_cast<uint8_t>(c.c), &r.v[0]));
            break;
        case PeerCmd::kGetBytes:
            if (!in_buf(c.a, c.b)) {
                r.rc = -1;
                break;
            }
            if (!send_all(fd, &r, sizeof r) || !send_all(fd, ep.buf.data() + c.a, c.b)) return 6;
            continue;
        case PeerCmd::kPostRecv: {
            std::vector<SgeDesc> d(c.n);
            if (c.n && !recv_all(fd, d.data(), c.n * sizeof(SgeDesc))) return 7;
            std::vector<ibex_sge_t> sg;
            for (auto &x : d) sg.push_back({ep.va(x.off), static_cast<uint32_t>(x.len), ibex_mr_lkey(ep.mr)});
            ibex_recv_wr_t wr{};
            wr.wr_id = c.a;
            wr.sg_list = sg.empty() ? nullptr : sg.data();
            wr.num_sge = static_cast<int>(sg.size());
            r.rc = ibex_post_recv(ep.qp, &wr, nullptr);
            break;
        }
        case PeerCmd::kWaitRecv: {
            auto wc = ep.wait(c.n, static_cast<int>(c.a));
            r.rc = static_cast<int64_t>(wc.size());
            if (!send_all(fd, &r, sizeof r) || (!wc.empty() && !send_all(fd, wc.data(), wc.size() * sizeof(ibex_wc_t))))
                return 8;
            continue;
        }
        case PeerCmd::kCounters: {
            ibex_counters_t k = ep.counters();
            if (!send_all(fd, &r, sizeof r) || !send_all(fd, &k, sizeof k)) return 9;
            continue;
        }
        case PeerCmd::kRecvLoop: {
            // n receives expected; slots of b bytes from offset a, c slots, message k carries
            // pattern d + k; deadline e ms. Receives are reposted as they complete.
            const uint64_t total = c.n, base = c.a, slot = c.b, nslots = c.c, seed0 = c.d;
            std::vector<RecvRecord> recs;
            recs.reserve(total);
            uint64_t posted = 0;
            auto post = [&](uint64_t k) {
                ibex_sge_t s{ep.va(base + (k % nslots) * slot), static_cast<uint32_t>(slot), ibex_mr_lkey(ep.mr)};
                ibex_recv_wr_t wr{};
                wr.wr_id = k;
                wr.sg_list = &s;
                wr.num_sge = 1;
                return ibex_post_recv(ep.qp, &wr, nullptr) == IBEX_OK;
            };
            if (!in_buf(base, slot * nslots)) {
                r.rc = -1;
                break;
            }
            bool ok = true;
            while (posted < total && posted < nslots && (ok = post(posted))) ++posted;
            // Tell the parent the receives are up before it starts sending.
            if (!send_all(fd, &r, sizeof r)) return 10;
            const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(c.e);
            ibex_wc_t wc[64];
            while (ok && recs.size() < total && std::chrono::steady_clock::now() < end) {
                int got = 0;
                if (ibex_poll_cq(ep.cq, 64, wc, &got) != IBEX_OK) break;
                for (int i = 0; i < got; ++i) {
                    const uint64_t k = recs.size();
                    RecvRecord rr{};
                    rr.status = wc[i].status;
                    rr.byte_len = wc[i].byte_len;
                    rr.imm = wc[i].imm_data;
                    rr.flags = wc[i].wc_flags;
                    rr.opcode = wc[i].opcode;
                    if (wc[i].wr_id != k) rr.mismatches = 0xffffffffu; // out of order
                    else if (wc[i].status == IBEX_WC_SUCCESS && wc[i].opcode == IBEX_WC_RECV) // WRITE_WITH_IMM: no data here
                        rr.mismatches = static_cast<uint32_t>(
                            check_pattern(ep.buf.data() + base + (k % nslots) * slot,
                                          std::min<uint64_t>(wc[i].byte_len, slot), seed0 + k));
                    recs.push_back(rr);
                    if (posted < total && !(ok = post(posted))) break;
                    ++posted;
                }
            }
            r.rc = static_cast<int64_t>(recs.size());
            if (!send_all(fd, &r, sizeof r) ||
                (!recs.empty() && !send_all(fd, recs.data(), recs.size() * sizeof(RecvRecord))))
                return 11;
            continue;
        }
        case PeerCmd::kExit:
            send_all(fd, &r, sizeof r);
            ep.close();
            return 0;
        default: return 12;
        }
        if (!send_all(fd, &r, sizeof r)) return 13;
    }
}

} // namespace peer_detail

// ---------------------------------------------------------------- the parent's handle

class RemotePeer {
public:
    // Forks the child and reads its hello. Fork before opening any context here.
    bool start(const PeerConfig &cfg) {
        cfg_ = cfg;
        if (!child_.start([cfg](int fd) { return peer_detail::serve(fd, cfg); }, cfg.max_seconds)) {
            error_ = "fork/socketpair failed";
            return false;
        }
        if (!recv_all(child_.fd(), &hello_, sizeof hello_, 20000) || hello_.status != 0) {
            error_ = "no hello from the child (status " + std::to_string(hello_.status) + ")";
            return false;
        }
        if (ibex_ep_addr_unpack(hello_.addr, sizeof hello_.addr, &addr_) != IBEX_OK) {
            error_ = std::string("child's address does not unpack: ") + ibex_last_error();
            return false;
        }
        return true;
    }
    // Sends the parent's QP address; the child connects (and sets faults/timers).
    bool connect(const ibex_ep_addr_t &local) {
        uint8_t wire[IBEX_EP_ADDR_WIRE_LEN];
        if (ibex_ep_addr_pack(&local, wire, sizeof wire) != IBEX_OK) return fail("pack");
        if (!send_all(child_.fd(), wire, sizeof wire)) return fail("send address");
        PeerReply r;
        if (!recv_all(child_.fd(), &r, sizeof r, 20000)) return fail("no ready from the child");
        if (r.rc != 0) return fail("child could not connect: status " + std::to_string(r.rc));
        return true;
    }

    const ibex_ep_addr_t &addr() const { return addr_; }
    uint64_t va(uint64_t off = 0) const { return hello_.va + off; }
    uint32_t rkey() const { return hello_.rkey; }
    uint64_t len() const { return hello_.len; }
    ChildProcess &process() { return child_; }
    const std::string &error() const { return error_; }

    // Pattern bytes [start, start + len) of `seed` at buffer offset off.
    int64_t fill_pattern(uint64_t off, uint64_t len, uint64_t seed, uint64_t start = 0) {
        return call({PeerCmd::kFillPattern, 0, off, len, seed, start});
    }
    int64_t fill_const(uint64_t off, uint64_t len, uint8_t v) { return call({PeerCmd::kFillConst, 0, off, len, v}); }
    // Mismatching byte count (0 = identical), -1 on error; *first = first bad offset.
    int64_t verify_pattern(uint64_t off, uint64_t len, uint64_t seed, uint64_t start = 0, uint64_t *first = nullptr) {
        PeerReply r;
        int64_t rc = call({PeerCmd::kVerifyPattern, 0, off, len, seed, start}, &r);
        if (first) *first = r.v[0];
        return rc;
    }
    int64_t verify_const(uint64_t off, uint64_t len, uint8_t v, uint64_t *first = nullptr) {
        PeerReply r;
        int64_t rc = call({PeerCmd::kVerifyConst, 0, off, len, v}, &r);
        if (first) *first = r.v[0];
        return rc;
    }
    bool get_bytes(uint64_t off, uint64_t len, std::vector<uint8_t> &out) {
        out.assign(len, 0);
        PeerCmd c{PeerCmd::kGetBytes, 0, off, len};
        PeerReply r;
        if (!send_all(child_.fd(), &c, sizeof c) || !recv_all(child_.fd(), &r, sizeof r)) return fail("get_bytes");
        if (r.rc != 0) return fail("get_bytes: range");
        return recv_all(child_.fd(), out.data(), len) || fail("get_bytes: data");
    }
    int64_t post_recv(uint64_t wr_id, const std::vector<SgeDesc> &sges) {
        PeerCmd c{PeerCmd::kPostRecv, static_cast<uint32_t>(sges.size()), wr_id};
        PeerReply r;
        if (!send_all(child_.fd(), &c, sizeof c) ||
            (!sges.empty() && !send_all(child_.fd(), sges.data(), sges.size() * sizeof(SgeDesc))) ||
            !recv_all(child_.fd(), &r, sizeof r)) {
            fail("post_recv");
            return -1;
        }
        return r.rc;
    }
    std::vector<ibex_wc_t> wait_recv(uint32_t n, int timeout_ms = 10000) {
        PeerCmd c{PeerCmd::kWaitRecv, n, static_cast<uint64_t>(timeout_ms)};
        PeerReply r;
        std::vector<ibex_wc_t> wc;
        if (!send_all(child_.fd(), &c, sizeof c) || !recv_all(child_.fd(), &r, sizeof r, timeout_ms + 20000)) {
            fail("wait_recv");
            return wc;
        }
        wc.resize(static_cast<size_t>(r.rc));
        if (r.rc > 0 && !recv_all(child_.fd(), wc.data(), wc.size() * sizeof(ibex_wc_t))) wc.clear();
        return wc;
    }
    bool counters(ibex_counters_t &k) {
        PeerCmd c{PeerCmd::kCounters};
        PeerReply r;
        return (send_all(child_.fd(), &c, sizeof c) && recv_all(child_.fd(), &r, sizeof r) &&
                recv_all(child_.fd(), &k, sizeof k)) ||
               fail("counters");
    }
    // Starts the child's receive loop; returns once its receives are posted.
    bool recv_loop_start(uint32_t total, uint64_t base, uint64_t slot, uint64_t nslots, uint64_t seed0, int timeout_ms) {
        PeerCmd c{PeerCmd::kRecvLoop, total, base, slot, nslots, seed0, static_cast<uint64_t>(timeout_ms)};
        PeerReply r;
        if (!send_all(child_.fd(), &c, sizeof c) || !recv_all(child_.fd(), &r, sizeof r)) return fail("recv_loop");
        return r.rc == 0 || fail("recv_loop: bad arguments");
    }
    std::vector<RecvRecord> recv_loop_finish(int timeout_ms) {
        PeerReply r;
        std::vector<RecvRecord> recs;
        if (!recv_all(child_.fd(), &r, sizeof r, timeout_ms)) {
            fail("recv_loop result");
            return recs;
        }
        recs.resize(static_cast<size_t>(r.rc));
        if (r.rc > 0 && !recv_all(child_.fd(), recs.data(), recs.size() * sizeof(RecvRecord))) recs.clear();
        return recs;
    }
    // Asks the child to exit and returns its exit code (see ChildProcess::wait_exit).
    int finish(int timeout_ms = 10000) {
        if (child_.running()) {
            PeerCmd c{PeerCmd::kExit};
            PeerReply r;
            if (send_all(child_.fd(), &c, sizeof c, 2000)) recv_all(child_.fd(), &r, sizeof r, timeout_ms);
        }
        return child_.wait_exit(timeout_ms);
    }

private:
    int64_t call(PeerCmd c, PeerReply *out = nullptr) {
        PeerReply r;
        if (!send_all(child_.fd(), &c, sizeof c) || !recv_all(child_.fd(), &r, sizeof r, 60000)) {
            fail("command " + std::to_string(c.op) + " got no reply");
            return -1;
        }
        if (out) *out = r;
        return r.rc;
    }
    bool fail(const std::string &what) {
        error_ = what;
        return false;
    }

    PeerConfig cfg_;
    ChildProcess child_;
    PeerHello hello_{};
    ibex_ep_addr_t addr_{};
    std::string error_;
};

} // namespace ibex::test
