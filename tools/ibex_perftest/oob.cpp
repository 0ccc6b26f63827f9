#include "tools/ibex_perftest/oob.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <netdb.h>
#include <poll.h>
#include <unistd.h>
#include <vector>

#include "runtime/bootstrap/socket.h"

namespace ibex::perftest {

namespace bs = ibex::bootstrap;

namespace {

constexpr int kReportTimeoutMs = 30000; // reports and the closing barrier follow a run at once
constexpr int kDrainMs = 2000;          // how long to wait for the peer's "done"

std::string errno_text(const char *what, int e) { return std::string(what) + ": " + std::strerror(e); }

bs::Deadline deadline_after(int timeout_ms) {
    return timeout_ms < 0 ? bs::kNoDeadline : bs::deadline_after_ms(timeout_ms);
}

// A failed transfer in the words the tools print. timeout_ms: the receive's limit.
std::string transfer_error(const bs::SocketFailure &why, const char *what, int timeout_ms) {
    if (why.closed) return "the peer closed the out-of-band connection";
    if (why.timed_out) return "the peer sent nothing for " + std::to_string(timeout_ms / 1000) + " s";
    if (std::strcmp(why.call, "poll") == 0) return errno_text("poll", why.error);
    return errno_text(what, why.error);
}

bool hex_field(const std::string &s, unsigned digits, uint64_t *out) {
    if (s.empty() || s.size() > digits) return false;
    uint64_t v = 0;
    for (char c : s) {
        int d;
        if (c >= '0' && c <= '9') d = c - '0';
        else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
        else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
        else return false;
        v = v << 4 | uint64_t(d);
    }
    *out = v;
    return true;
}

} // namespace

std::string format_key(const KeyRecord &k, bool with_gid) {
    char buf[kKeyMsgSizeGid + 16];
    int n;
    if (!with_gid) {
        n = std::snprintf(buf, sizeof buf, "%04x:%04x:%06x:%06x:%08x:%016llx:%08x", k.lid, k.out_reads, k.qpn, k.psn,
                          k.rkey, static_cast<unsigned long long>(k.vaddr), k.srqn);
    } else {
        n = std::snprintf(buf, sizeof buf, "%04x:%04x:%06x:%06x:%08x:%016llx:", k.lid, k.out_reads, k.qpn, k.psn,
                          k.rkey, static_cast<unsigned long long>(k.vaddr));
        for (int i = 0; i < 16; ++i) n += std::snprintf(buf + n, sizeof buf - size_t(n), "%02x:", k.gid[i]);
        n += std::snprintf(buf + n, sizeof buf - size_t(n), "%08x:", k.srqn);
    }
    return std::string(buf, size_t(n) + 1); // with the NUL, as perftest sends it
}

bool parse_key(const char *buf, size_t len, bool with_gid, KeyRecord *k) {
    const size_t want = with_gid ? kKeyMsgSizeGid : kKeyMsgSize;
    if (len < want - 1) return false;
    std::string s(buf, strnlen(buf, len));
    std::vector<std::string> f;
    size_t start = 0;
    for (;;) {
        const size_t colon = s.find(':', start);
        if (colon == std::string::npos) {
            f.push_back(s.substr(start));
            break;
        }
        f.push_back(s.substr(start, colon - start));
        start = colon + 1;
    }
    if (with_gid) {
        if (f.size() == 24 && f[23].empty()) f.pop_back(); // trailing ':'
        if (f.size() != 23) return false;
    } else if (f.size() != 7) {
        return false;
    }
    uint64_t v[7];
    const unsigned digits[7] = {4, 4, 6, 6, 8, 16, 8};
    for (int i = 0; i < 6; ++i)
        if (!hex_field(f[size_t(i)], digits[i], &v[i])) return false;
    const size_t srqn_at = with_gid ? 22 : 6;
    if (!hex_field(f[srqn_at], 8, &v[6])) return false;
    k->lid = uint16_t(v[0]);
    k->out_reads = uint16_t(v[1]);
    k->qpn = uint32_t(v[2]);
    k->psn = uint32_t(v[3]);
    k->rkey = uint32_t(v[4]);
    k->vaddr = v[5];
    k->srqn = uint32_t(v[6]);
    std::memset(k->gid, 0, sizeof k->gid);
    if (with_gid) {
        for (int i = 0; i < 16; ++i) {
            uint64_t b;
            if (!hex_field(f[size_t(6 + i)], 2, &b)) return false;
            k->gid[i] = uint8_t(b);
        }
    }
    return true;
}

Oob::~Oob() {
    if (fd_ >= 0) ::close(fd_);
    if (listen_fd_ >= 0) ::close(listen_fd_);
}

bool Oob::listen(uint16_t port, std::string *err) {
    sockaddr_in any{};
    bs::SocketFailure why;
    uint16_t bound = 0;
    if (bs::resolve_ipv4("0.0.0.0", port, &any, &why) == IBEX_OK &&
        bs::listen_tcp(any, &listen_fd_, &bound, 1, &why) == IBEX_OK)
        return true;
    if (std::strcmp(why.call, "socket") == 0) {
        *err = errno_text("socket", why.error);
        return false;
    }
    *err = "cannot listen on TCP port " + std::to_string(port) + ": " + std::strerror(why.error) +
           (why.error == EADDRINUSE ? " (another server is running there? choose another port with -p)" : "");
    return false;
}

bool Oob::accept(std::string *err) {
    bs::SocketFailure why;
    if (bs::accept_tcp(listen_fd_, bs::kNoDeadline, &fd_, &why) != IBEX_OK) {
        *err = errno_text(why.call, why.error);
        return false;
    }
    ::close(listen_fd_);
    listen_fd_ = -1;
    return true;
}

bool Oob::connect(const std::string &host, uint16_t port, int timeout_ms, std::string *err) {
    sockaddr_in addr{};
    bs::SocketFailure why;
    if (bs::resolve_ipv4(host, port, &addr, &why) != IBEX_OK) {
        *err = "cannot resolve server \"" + host + "\": " + gai_strerror(why.error);
        return false;
    }
    const std::string where = bs::addr_string(addr);
    // A refused connection may be a server that is not listening yet: try again until the
    // deadline. Anything else is final.
    const bs::ConnectRetry retry{.refused_only = true, .pause_ms = 100};
    if (bs::connect_tcp(addr, bs::deadline_after_ms(timeout_ms), &fd_, retry, &why) == IBEX_OK) return true;
    if (why.timed_out) {
        *err = "cannot connect to server " + where + ": timed out after " +
               std::to_string(timeout_ms / 1000.0).substr(0, 4) + " s";
    } else if (std::strcmp(why.call, "connect") != 0) {
        *err = errno_text(why.call, why.error);
    } else {
        *err = "cannot connect to server " + where + ": " + std::strerror(why.error);
        if (why.error == ECONNREFUSED)
            *err += " (no server listening; gave up after " + std::to_string(timeout_ms / 1000) + " s)";
    }
    return false;
}

bool Oob::send_all(const void *buf, size_t len, std::string *err) {
    bs::SocketFailure why;
    if (bs::send_all(fd_, buf, len, bs::kNoDeadline, &why)) return true;
    *err = transfer_error(why, "out-of-band send to the peer", -1);
    return false;
}

bool Oob::recv_all(void *buf, size_t len, int timeout_ms, std::string *err) {
    if (while_waiting_) return recv_all_driving(buf, len, timeout_ms, err);
    bs::SocketFailure why;
    if (bs::recv_all(fd_, buf, len, deadline_after(timeout_ms), &why)) return true;
    *err = transfer_error(why, "out-of-band receive from the peer", timeout_ms);
    return false;
}

bool Oob::recv_all_driving(void *buf, size_t len, int timeout_ms, std::string *err) {
    constexpr int kSliceMs = 1;
    const bs::Deadline deadline = deadline_after(timeout_ms);
    auto *p = static_cast<char *>(buf);
    size_t got = 0;
    for (;;) {
        bs::SocketFailure why;
        const ssize_t n = bs::recv_available(fd_, p + got, len - got, &why);
        if (n < 0) {
            *err = transfer_error(why, "out-of-band receive from the peer", timeout_ms);
            return false;
        }
        got += static_cast<size_t>(n);
        if (got == len) return true;
        while_waiting_();
        if (bs::Clock::now() >= deadline) {
            why.timed_out = true;
            *err = transfer_error(why, "out-of-band receive from the peer", timeout_ms);
            return false;
        }
        pollfd pfd{fd_, POLLIN, 0};
        ::poll(&pfd, 1, timeout_ms < 0 ? kSliceMs : std::min(kSliceMs, bs::ms_left(deadline)));
    }
}

bool Oob::send_msg(const std::string &msg, std::string *err) {
    char buf[kCtrlMsgSize] = {};
    std::memcpy(buf, msg.data(), std::min(msg.size(), kCtrlMsgSize - 1));
    return send_all(buf, sizeof buf, err);
}

bool Oob::recv_msg(std::string *msg, int timeout_ms, std::string *err) {
    char buf[kCtrlMsgSize];
    size_t have = partial_.size();
    std::memcpy(buf, partial_.data(), have);
    partial_.clear();
    if (!recv_all(buf + have, sizeof buf - have, timeout_ms, err)) return false;
    buf[kCtrlMsgSize - 1] = 0;
    *msg = buf;
    return true;
}

int Oob::poll_msg(std::string *msg, std::string *err) {
    char buf[kCtrlMsgSize];
    const size_t want = kCtrlMsgSize - partial_.size();
    bs::SocketFailure why;
    const ssize_t n = bs::recv_available(fd_, buf, want, &why);
    if (n < 0) {
        *err = transfer_error(why, "out-of-band receive from the peer", -1);
        return -1;
    }
    if (n == 0) return 0;
    partial_.append(buf, size_t(n));
    if (partial_.size() < kCtrlMsgSize) return 0;
    partial_[kCtrlMsgSize - 1] = 0;
    *msg = partial_.c_str();
    partial_.clear();
    return 1;
}

std::string version_field() {
    std::string f(kVersionFieldSize, '\0');
    const std::string v = kPerftestVersion;
    const std::string tag = kIbexTag;
    f.replace(0, v.size(), v);
    f.replace(v.size() + 1, tag.size(), tag);
    return f;
}

PeerVersion parse_version_field(const char *buf, size_t len) {
    PeerVersion p;
    const size_t n = strnlen(buf, len);
    p.text.assign(buf, n);
    p.number = std::strtod(p.text.c_str(), nullptr);
    const std::string tag = kIbexTag;
    p.ibex = n + 1 + tag.size() <= len && std::memcmp(buf + n + 1, tag.data(), tag.size()) == 0;
    return p;
}

void put_be64(uint64_t v, unsigned char out[8]) {
    for (int i = 7; i >= 0; --i, v >>= 8) out[i] = static_cast<unsigned char>(v & 0xff);
}

uint64_t get_be64(const unsigned char in[8]) {
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v = v << 8 | in[i];
    return v;
}

uint64_t double_bits(double d) {
    uint64_t b;
    std::memcpy(&b, &d, sizeof b);
    return b;
}

double bits_double(uint64_t b) {
    double d;
    std::memcpy(&d, &b, sizeof d);
    return d;
}

namespace {

// A peer that fails sends "error: ..." where we expect its next message; say so rather
// than "malformed".
bool peer_error(const char *buf, size_t len, std::string *err) {
    static constexpr char kPrefix[] = "error: ";
    if (len < sizeof kPrefix - 1 || std::memcmp(buf, kPrefix, sizeof kPrefix - 1) != 0) return false;
    *err = "the peer failed: " + std::string(buf + sizeof kPrefix - 1, strnlen(buf, len) - (sizeof kPrefix - 1));
    return true;
}

} // namespace

bool Oob::xchg(bool client, const void *mine, void *theirs, size_t n, int timeout_ms, std::string *err) {
    if (client && !send_all(mine, n, err)) return false;
    if (!recv_all(theirs, n, timeout_ms, err)) return false;
    if (!client && !send_all(mine, n, err)) return false;
    return true;
}

bool Oob::key_barrier(bool client, const KeyRecord &mine, int timeout_ms, std::string *err) {
    const std::string out = format_key(mine, true);
    char in[kKeyMsgSizeGid];
    if (!xchg(client, out.data(), in, sizeof in, timeout_ms, err)) return false;
    KeyRecord k;
    if (peer_error(in, sizeof in, err)) return false;
    if (!parse_key(in, sizeof in, true, &k)) {
        *err = "out of step with the peer: expected a key record, got \"" + std::string(in, strnlen(in, sizeof in)) + "\"";
        return false;
    }
    return true;
}

bool Oob::exchange_reports(bool client, const WireReport &mine, WireReport *theirs, std::string *err) {
    const uint64_t out[5] = {mine.size, mine.iters, double_bits(mine.bw_peak), double_bits(mine.bw_avg),
                             double_bits(mine.msg_rate)};
    uint64_t in[5];
    for (int i = 0; i < 5; ++i) {
        unsigned char o[8], r[8];
        put_be64(out[i], o);
        if (!xchg(client, o, r, sizeof o, kReportTimeoutMs, err)) return false;
        in[i] = get_be64(r);
    }
    theirs->size = in[0];
    theirs->iters = in[1];
    theirs->bw_peak = bits_double(in[2]);
    theirs->bw_avg = bits_double(in[3]);
    theirs->msg_rate = bits_double(in[4]);
    return true;
}

bool Oob::close_exchange(bool client, const KeyRecord &mine, int timeout_ms, std::string *err) {
    if (!key_barrier(client, mine, timeout_ms, err)) return false;
    static constexpr char kDone[] = "done";
    if (!send_all(kDone, sizeof kDone, err)) return false;
    char in[sizeof kDone];
    std::string ignored;
    recv_all(in, sizeof in, kDrainMs, &ignored);
    return true;
}

bool Oob::exchange_keys(bool client, const std::vector<KeyRecord> &mine, std::vector<KeyRecord> *theirs,
                        std::string *err) {
    theirs->assign(mine.size(), KeyRecord{});
    for (size_t i = 0; i < mine.size(); ++i) {
        const std::string out = format_key(mine[i], true);
        char in[kKeyMsgSizeGid];
        if (client && !send_all(out.data(), out.size(), err)) return false;
        if (!recv_all(in, sizeof in, 30000, err)) return false;
        if (!client && !send_all(out.data(), out.size(), err)) return false;
        if (peer_error(in, sizeof in, err)) return false;
        if (!parse_key(in, sizeof in, true, &(*theirs)[i])) {
            *err = "the peer's key record is malformed: \"" + std::string(in, strnlen(in, sizeof in)) + "\"";
            return false;
        }
    }
    return true;
}

bool Oob::barrier(bool client, const std::string &tag, int timeout_ms, std::string *err) {
    std::string got;
    if (client && !send_msg(tag, err)) return false;
    if (!recv_msg(&got, timeout_ms, err)) return false;
    if (!client && !send_msg(tag, err)) return false;
    if (got != tag) {
        *err = "out of step with the peer: expected \"" + tag + "\", got \"" + got + "\"";
        return false;
    }
    return true;
}

} // namespace ibex::perftest
