#include "tools/ibex_perftest/oob.h"

#include <arpa/inet.h>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace ibex::perftest {

namespace {

using Clock = std::chrono::steady_clock;

constexpr int kReportTimeoutMs = 30000; // reports and the closing barrier follow a run at once
constexpr int kDrainMs = 2000;          // how long to wait for the peer's "done"

std::string errno_text(const char *what, int e) { return std::string(what) + ": " + std::strerror(e); }

int ms_left(Clock::time_point deadline) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    return left < 0 ? 0 : static_cast<int>(left);
}

void set_nodelay(int fd) {
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
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
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (listen_fd_ < 0) {
        *err = errno_text("socket", errno);
        return false;
    }
    int one = 1;
    setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    if (::bind(listen_fd_, reinterpret_cast<sockaddr *>(&a), sizeof a) < 0 || ::listen(listen_fd_, 1) < 0) {
        const int e = errno;
        *err = "cannot listen on TCP port " + std::to_string(port) + ": " + std::strerror(e) +
               (e == EADDRINUSE ? " (another server is running there? choose another port with -p)" : "");
        return false;
    }
    return true;
}

bool Oob::accept(std::string *err) {
    for (;;) {
        fd_ = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
        if (fd_ >= 0) break;
        if (errno == EINTR) continue;
        *err = errno_text("accept", errno);
        return false;
    }
    ::close(listen_fd_);
    listen_fd_ = -1;
    set_nodelay(fd_);
    return true;
}

bool Oob::connect(const std::string &host, uint16_t port, int timeout_ms, std::string *err) {
    addrinfo hints{};
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo *res = nullptr;
    const std::string service = std::to_string(port);
    const int gai = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &res);
    if (gai != 0 || !res) {
        *err = "cannot resolve server \"" + host + "\": " + gai_strerror(gai);
        return false;
    }
    sockaddr_in addr;
    std::memcpy(&addr, res->ai_addr, sizeof addr);
    ::freeaddrinfo(res);
    char text[INET_ADDRSTRLEN] = "?";
    inet_ntop(AF_INET, &addr.sin_addr, text, sizeof text);
    const std::string where = std::string(text) + ":" + service;

    const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
    int last_err = 0;
    for (;;) {
        const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0) {
            *err = errno_text("socket", errno);
            return false;
        }
        int e = 0;
        if (::connect(fd, reinterpret_cast<sockaddr *>(&addr), sizeof addr) < 0) {
            e = errno;
            if (e == EINPROGRESS) {
                pollfd p{fd, POLLOUT, 0};
                const int n = ::poll(&p, 1, ms_left(deadline));
                if (n == 0) {
                    ::close(fd);
                    *err = "cannot connect to server " + where + ": timed out after " +
                           std::to_string(timeout_ms / 1000.0).substr(0, 4) + " s";
                    return false;
                }
                socklen_t len = sizeof e;
                e = 0;
                getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &len);
            }
        }
        if (e == 0) {
            const int flags = fcntl(fd, F_GETFL);
            fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
            fd_ = fd;
            set_nodelay(fd_);
            return true;
        }
        ::close(fd);
        last_err = e;
        // A refused connection may be a server that is not listening yet: try again until
        // the deadline. Anything else is final.
        if (e != ECONNREFUSED || ms_left(deadline) == 0) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(std::min(100, ms_left(deadline))));
        if (ms_left(deadline) == 0) break;
    }
    *err = "cannot connect to server " + where + ": " + std::strerror(last_err);
    if (last_err == ECONNREFUSED) *err += " (no server listening; gave up after " + std::to_string(timeout_ms / 1000) + " s)";
    return false;
}

bool Oob::send_all(const void *buf, size_t len, std::string *err) {
    const char *p = static_cast<const char *>(buf);
    while (len) {
        const ssize_t n = ::send(fd_, p, len, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR) continue;
            *err = errno_text("out-of-band send to the peer", errno);
            return false;
        }
        p += n;
        len -= size_t(n);
    }
    return true;
}

bool Oob::recv_all(void *buf, size_t len, int timeout_ms, std::string *err) {
    char *p = static_cast<char *>(buf);
    const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms < 0 ? 0 : timeout_ms);
    while (len) {
        pollfd pf{fd_, POLLIN, 0};
        const int r = ::poll(&pf, 1, timeout_ms < 0 ? -1 : ms_left(deadline));
        if (r < 0) {
            if (errno == EINTR) continue;
            *err = errno_text("poll", errno);
            return false;
        }
        if (r == 0) {
            *err = "the peer sent nothing for " + std::to_string(timeout_ms / 1000) + " s";
            return false;
        }
        const ssize_t n = ::recv(fd_, p, len, 0);
        if (n == 0) {
            *err = "the peer closed the out-of-band connection";
            return false;
        }
        if (n < 0) {
            if (errno == EINTR || errno == EAGAIN) continue;
            *err = errno_text("out-of-band receive from the peer", errno);
            return false;
        }
        p += n;
        len -= size_t(n);
    }
    return true;
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
    const ssize_t n = ::recv(fd_, buf, want, MSG_DONTWAIT);
    if (n == 0) {
        *err = "the peer closed the out-of-band connection";
        return -1;
    }
    if (n < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return 0;
        *err = errno_text("out-of-band receive from the peer", errno);
        return -1;
    }
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
