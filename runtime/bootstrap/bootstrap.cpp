#include "runtime/bootstrap/bootstrap.h"

#include <arpa/inet.h>
#include <cerrno>
#include <cstring>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "runtime/bootstrap/socket.h"
#include "runtime/bootstrap/unique_id.h"
#include "runtime/base/log.h"
#include "runtime/base/status.h"

namespace ibex::bootstrap {
namespace {

enum FrameType : uint32_t {
    kHello = 1,   // u32 rank, u32 nranks, token
    kData = 2,    // one rank's all-gather contribution
    kAll = 3,     // the gathered result, from rank 0
    kAbort = 4,   // u32 status, i32 origin rank, detail text
    kBye = 5,
    kReject = 6,  // text: why rank 0 refused this rank
    kWelcome = 7, // everyone has joined
    kRelay = 8,   // u32 to, u32 from, message: for rank `to`, forwarded by rank 0
};

constexpr uint32_t kMaxFrame = 64u << 20;
constexpr int kControlSendMs = 200; // aborts and goodbyes never wait long on a peer

void put32(std::vector<uint8_t> &v, uint32_t x) {
    x = htonl(x);
    const auto *p = reinterpret_cast<const uint8_t *>(&x);
    v.insert(v.end(), p, p + 4);
}
uint32_t get32(const uint8_t *p) {
    uint32_t x;
    std::memcpy(&x, p, 4);
    return ntohl(x);
}

bool read_frame_blocking(int fd, Deadline d, uint32_t *type, std::vector<uint8_t> *payload) {
    uint8_t hdr[8];
    if (!recv_all(fd, hdr, 8, d)) return false;
    *type = get32(hdr);
    const uint32_t len = get32(hdr + 4);
    if (len > kMaxFrame) return false;
    payload->resize(len);
    return len == 0 || recv_all(fd, payload->data(), len, d);
}

bool write_frame(int fd, uint32_t type, const void *data, size_t len, Deadline d) {
    std::vector<uint8_t> buf;
    buf.reserve(8 + len);
    put32(buf, type);
    put32(buf, static_cast<uint32_t>(len));
    const auto *p = static_cast<const uint8_t *>(data);
    buf.insert(buf.end(), p, p + len);
    return send_all(fd, buf.data(), buf.size(), d);
}

} // namespace

Bootstrap::~Bootstrap() {
    for (Conn &c : conns_)
        if (c.fd >= 0) ::close(c.fd);
}

ibex_status_t Bootstrap::join(const char *id_text, int rank, int nranks, int timeout_ms,
                              std::unique_ptr<Bootstrap> *out) {
    ParsedId id;
    IBEX_TRY(parse_unique_id(id_text, &id));
    std::unique_ptr<Bootstrap> b(new Bootstrap(rank, nranks));
    if (nranks == 1) {
        if (const int lfd = take_listener(id_text); lfd >= 0) ::close(lfd);
        *out = std::move(b);
        return IBEX_OK;
    }
    const Deadline deadline = deadline_after_ms(timeout_ms);
    if (rank == 0) {
        int lfd = take_listener(id_text);
        if (lfd < 0) {
            // The id came from the launcher's environment: rank 0 opens the port itself.
            sockaddr_in addr{};
            IBEX_TRY(resolve_ipv4(id.host, id.port, &addr));
            uint16_t bound = 0;
            IBEX_TRY(listen_tcp(addr, &lfd, &bound));
        }
        const ibex_status_t st = accept_all(*b, lfd, id.token, timeout_ms);
        ::close(lfd);
        if (st != IBEX_OK) return st;
        for (Conn &c : b->conns_) {
            if (!write_frame(c.fd, kWelcome, nullptr, 0, deadline))
                return fail(IBEX_ERR_REMOTE, "bootstrap: rank %d went away while joining", c.rank);
        }
    } else {
        sockaddr_in addr{};
        IBEX_TRY(resolve_ipv4(id.host, id.port, &addr));
        Conn c;
        c.rank = 0;
        IBEX_TRY(connect_tcp(addr, deadline, &c.fd));
        b->conns_.push_back(std::move(c));
        Conn &root = b->conns_.back();
        std::vector<uint8_t> hello;
        put32(hello, static_cast<uint32_t>(rank));
        put32(hello, static_cast<uint32_t>(nranks));
        hello.insert(hello.end(), id.token.begin(), id.token.end());
        if (!write_frame(root.fd, kHello, hello.data(), hello.size(), deadline))
            return fail(IBEX_ERR_REMOTE, "bootstrap: rank 0 at %s:%u closed the connection", id.host.c_str(), id.port);
        uint32_t type = 0;
        std::vector<uint8_t> payload;
        if (!read_frame_blocking(root.fd, deadline, &type, &payload))
            return fail(IBEX_ERR_TIMEOUT,
                        "bootstrap: rank %d of %d joined %s:%u but not all ranks arrived within %d ms", rank,
                        nranks, id.host.c_str(), id.port, timeout_ms);
        if (type == kReject)
            return fail(IBEX_ERR_INVALID_ARGUMENT, "bootstrap: rank 0 refused rank %d: %.*s", rank,
                        static_cast<int>(payload.size()), reinterpret_cast<const char *>(payload.data()));
        if (type == kAbort && payload.size() >= 8)
            return fail(IBEX_ERR_REMOTE, "bootstrap: rank 0 gave up: %.*s", static_cast<int>(payload.size() - 8),
                        reinterpret_cast<const char *>(payload.data() + 8));
        if (type != kWelcome) return fail(IBEX_ERR_INTERNAL, "bootstrap: unexpected frame %u while joining", type);
    }
    *out = std::move(b);
    return IBEX_OK;
}

ibex_status_t Bootstrap::accept_all(Bootstrap &b, int lfd, const std::string &token, int timeout_ms) {
    const Deadline deadline = deadline_after_ms(timeout_ms);
    const int n = b.nranks_;
    b.conns_.resize(n - 1);
    int joined = 0;
    auto refuse_all = [&](const std::string &why) {
        for (Conn &c : b.conns_)
            if (c.fd >= 0) write_frame(c.fd, kReject, why.data(), why.size(), deadline_after_ms(kControlSendMs));
    };
    while (joined < n - 1) {
        int fd = -1;
        if (accept_tcp(lfd, deadline, &fd) != IBEX_OK) {
            std::string missing;
            for (int r = 1; r < n; ++r)
                if (b.conns_[r - 1].fd < 0) missing += (missing.empty() ? "" : ",") + std::to_string(r);
            const std::string why = "ranks " + missing + " did not join within " + std::to_string(timeout_ms) + " ms";
            refuse_all(why);
            return fail(IBEX_ERR_TIMEOUT, "bootstrap: %d of %d ranks joined; %s", joined + 1, n, why.c_str());
        }
        uint32_t type = 0;
        std::vector<uint8_t> p;
        const Deadline hello_by = std::min(deadline, deadline_after_ms(2000));
        if (!read_frame_blocking(fd, hello_by, &type, &p) || type != kHello || p.size() < 8) {
            ::close(fd); // a port scanner or a stray client; keep waiting for real ranks
            continue;
        }
        const int r = static_cast<int>(get32(p.data()));
        const int their_n = static_cast<int>(get32(p.data() + 4));
        const std::string their_token(p.begin() + 8, p.end());
        std::string why;
        if (their_token != token)
            why = "token mismatch (another job's id?)";
        else if (their_n != n)
            why = "rank " + std::to_string(r) + " says there are " + std::to_string(their_n) + " ranks, rank 0 says " +
                  std::to_string(n);
        else if (r <= 0 || r >= n)
            why = "rank " + std::to_string(r) + " is out of range 1.." + std::to_string(n - 1);
        else if (b.conns_[r - 1].fd >= 0)
            why = "rank " + std::to_string(r) + " joined twice";
        if (!why.empty()) {
            write_frame(fd, kReject, why.data(), why.size(), deadline_after_ms(kControlSendMs));
            ::close(fd);
            if (their_token != token) continue;
            refuse_all(why);
            return fail(IBEX_ERR_INVALID_ARGUMENT, "bootstrap: %s", why.c_str());
        }
        b.conns_[r - 1].fd = fd;
        b.conns_[r - 1].rank = r;
        ++joined;
    }
    return IBEX_OK;
}

bool Bootstrap::send_frame(Conn &c, uint32_t type, const void *data, size_t len, int timeout_ms) {
    if (c.closed || c.fd < 0) return false;
    return write_frame(c.fd, type, data, len, deadline_after_ms(timeout_ms));
}

void Bootstrap::note_failure(ibex_status_t status, const std::string &detail, int origin, bool relay) {
    if (failed_) return;
    failed_ = true;
    fail_status_ = status;
    fail_detail_ = detail;
    if (!relay) return;
    std::vector<uint8_t> p;
    put32(p, static_cast<uint32_t>(status));
    put32(p, static_cast<uint32_t>(origin));
    p.insert(p.end(), detail.begin(), detail.end());
    for (Conn &c : conns_)
        if (c.rank != origin) send_frame(c, kAbort, p.data(), p.size(), kControlSendMs);
}

void Bootstrap::pump() {
    uint8_t buf[4096];
    for (Conn &c : conns_) {
        while (!c.closed) {
            const ssize_t n = ::recv(c.fd, buf, sizeof buf, MSG_DONTWAIT);
            if (n > 0) {
                c.in.insert(c.in.end(), buf, buf + n);
                continue;
            }
            if (n < 0 && (errno == EAGAIN || errno == EINTR)) break;
            c.closed = true;
        }
        size_t off = 0;
        while (c.in.size() - off >= 8) {
            const uint32_t type = get32(c.in.data() + off);
            const uint32_t len = get32(c.in.data() + off + 4);
            if (len > kMaxFrame) {
                c.closed = true;
                break;
            }
            if (c.in.size() - off - 8 < len) break;
            const uint8_t *p = c.in.data() + off + 8;
            off += 8 + len;
            if (type == kAbort && len >= 8) {
                const auto st = static_cast<ibex_status_t>(get32(p));
                const int origin = static_cast<int>(get32(p + 4));
                std::string detail(reinterpret_cast<const char *>(p + 8), len - 8);
                if (rank_ == 0 && detail.rfind("rank ", 0) != 0)
                    detail = "rank " + std::to_string(origin) + ": " + detail;
                note_failure(st == IBEX_ERR_TIMEOUT ? IBEX_ERR_TIMEOUT : IBEX_ERR_REMOTE, detail, origin, rank_ == 0);
            } else if (type == kBye) {
                c.bye = true;
            } else if (type == kRelay && len >= 8) {
                relay(get32(p), get32(p + 4), p + 8, len - 8);
            } else {
                c.frames.push_back(Frame{type, std::vector<uint8_t>(p, p + len)});
            }
        }
        c.in.erase(c.in.begin(), c.in.begin() + static_cast<std::ptrdiff_t>(off));
        if (c.closed && !c.bye && !closing_ && !failed_) {
            const std::string detail =
                c.rank == 0 ? std::string("rank 0 closed its bootstrap connection (process exited or was killed)")
                            : "rank " + std::to_string(c.rank) +
                                  " closed its bootstrap connection (process exited or was killed)";
            note_failure(IBEX_ERR_REMOTE, detail, c.rank, rank_ == 0);
        }
    }
}

void Bootstrap::relay(uint32_t to, uint32_t from, const uint8_t *msg, size_t len) {
    if (from >= static_cast<uint32_t>(nranks_) || to >= static_cast<uint32_t>(nranks_)) return;
    if (static_cast<int>(to) == rank_) {
        inbox_.resize(static_cast<size_t>(nranks_));
        inbox_[from].emplace_back(msg, msg + len);
        return;
    }
    if (rank_ != 0) return; // only rank 0 forwards
    std::vector<uint8_t> f;
    put32(f, to);
    put32(f, from);
    f.insert(f.end(), msg, msg + len);
    // A lost forward would leave the receiver waiting: a closed connection is reported as
    // the receiver's death anyway, so nothing else is to be done here.
    send_frame(conns_[to - 1], kRelay, f.data(), f.size(), kControlSendMs * 5);
}

template <typename Pred>
ibex_status_t Bootstrap::wait_for(Pred pred, int timeout_ms, const char *what) {
    const Deadline deadline = deadline_after_ms(timeout_ms);
    for (;;) {
        {
            std::lock_guard l(mu_);
            pump();
            if (pred()) return IBEX_OK;
            if (failed_) return fail(fail_status_, "%s", fail_detail_.c_str());
        }
        const int left = ms_left(deadline, 10);
        if (left <= 0) return fail(IBEX_ERR_TIMEOUT, "bootstrap: %s: no answer within %d ms", what, timeout_ms);
        std::vector<pollfd> p;
        for (int fd : fds()) p.push_back(pollfd{fd, POLLIN, 0});
        // Short naps: the owner's progress thread may consume the readiness and queue the
        // frame for us, so never wait long on the descriptors alone.
        ::poll(p.data(), p.size(), left);
    }
}

ibex_status_t Bootstrap::allgather(const void *mine, size_t len, void *all, int timeout_ms) {
    auto *out = static_cast<uint8_t *>(all);
    std::memcpy(out + static_cast<size_t>(rank_) * len, mine, len);
    if (nranks_ == 1) return IBEX_OK;
    const size_t total = len * static_cast<size_t>(nranks_);
    if (rank_ == 0) {
        IBEX_TRY(wait_for(
            [&] {
                for (const Conn &c : conns_)
                    if (c.frames.empty()) return false;
                return true;
            },
            timeout_ms, "all-gather"));
        std::lock_guard l(mu_);
        for (Conn &c : conns_) {
            Frame f = std::move(c.frames.front());
            c.frames.pop_front();
            if (f.type != kData || f.payload.size() != len)
                return fail(IBEX_ERR_INVALID_ARGUMENT,
                            "bootstrap: rank %d sent %zu bytes to an all-gather of %zu (ranks disagree on the call)",
                            c.rank, f.payload.size(), len);
            std::memcpy(out + static_cast<size_t>(c.rank) * len, f.payload.data(), len);
        }
        for (Conn &c : conns_)
            if (!send_frame(c, kAll, out, total, timeout_ms))
                return fail(IBEX_ERR_REMOTE, "bootstrap: rank %d went away during an all-gather", c.rank);
        return IBEX_OK;
    }
    {
        std::lock_guard l(mu_);
        if (failed_) return fail(fail_status_, "%s", fail_detail_.c_str());
        if (!send_frame(conns_[0], kData, mine, len, timeout_ms))
            return fail(IBEX_ERR_REMOTE, "bootstrap: rank 0 went away during an all-gather");
    }
    IBEX_TRY(wait_for([&] { return !conns_[0].frames.empty(); }, timeout_ms, "all-gather"));
    std::lock_guard l(mu_);
    Frame f = std::move(conns_[0].frames.front());
    conns_[0].frames.pop_front();
    if (f.type == kReject)
        return fail(IBEX_ERR_INVALID_ARGUMENT, "bootstrap: %.*s", static_cast<int>(f.payload.size()),
                    reinterpret_cast<const char *>(f.payload.data()));
    if (f.type != kAll || f.payload.size() != total)
        return fail(IBEX_ERR_INVALID_ARGUMENT, "bootstrap: all-gather answer of %zu bytes, expected %zu",
                    f.payload.size(), total);
    std::memcpy(out, f.payload.data(), total);
    return IBEX_OK;
}

ibex_status_t Bootstrap::barrier(int timeout_ms) {
    std::vector<uint8_t> all(static_cast<size_t>(nranks_));
    const uint8_t one = 1;
    return allgather(&one, 1, all.data(), timeout_ms);
}

ibex_status_t Bootstrap::send_to(int peer, const void *data, size_t len, int timeout_ms) {
    if (peer < 0 || peer >= nranks_ || peer == rank_)
        return fail(IBEX_ERR_INVALID_ARGUMENT, "bootstrap: no rank %d to send to (rank %d of %d)", peer, rank_, nranks_);
    std::lock_guard l(mu_);
    if (failed_) return fail(fail_status_, "%s", fail_detail_.c_str());
    std::vector<uint8_t> f;
    put32(f, static_cast<uint32_t>(peer));
    put32(f, static_cast<uint32_t>(rank_));
    const auto *p = static_cast<const uint8_t *>(data);
    f.insert(f.end(), p, p + len);
    Conn &via = rank_ == 0 ? conns_[static_cast<size_t>(peer) - 1] : conns_[0];
    if (!send_frame(via, kRelay, f.data(), f.size(), timeout_ms))
        return fail(IBEX_ERR_REMOTE, "bootstrap: rank %d went away while rank %d sent to rank %d", via.rank, rank_, peer);
    return IBEX_OK;
}

ibex_status_t Bootstrap::recv_from(int peer, std::vector<uint8_t> *data, int timeout_ms) {
    if (peer < 0 || peer >= nranks_ || peer == rank_)
        return fail(IBEX_ERR_INVALID_ARGUMENT, "bootstrap: no rank %d to receive from (rank %d of %d)", peer, rank_,
                    nranks_);
    const auto from = static_cast<size_t>(peer);
    const std::string what = "waiting for a message from rank " + std::to_string(peer);
    IBEX_TRY(wait_for([&] { return inbox_.size() > from && !inbox_[from].empty(); }, timeout_ms, what.c_str()));
    std::lock_guard l(mu_);
    *data = std::move(inbox_[from].front());
    inbox_[from].pop_front();
    return IBEX_OK;
}

std::vector<int> Bootstrap::fds() const {
    std::lock_guard l(mu_);
    std::vector<int> out;
    for (const Conn &c : conns_)
        if (!c.closed && c.fd >= 0) out.push_back(c.fd);
    return out;
}

std::string Bootstrap::local_ip() const {
    std::lock_guard l(mu_);
    for (const Conn &c : conns_) {
        sockaddr_in a{};
        socklen_t len = sizeof a;
        if (c.fd >= 0 && ::getsockname(c.fd, reinterpret_cast<sockaddr *>(&a), &len) == 0) {
            char ip[INET_ADDRSTRLEN];
            if (::inet_ntop(AF_INET, &a.sin_addr, ip, sizeof ip)) return ip;
        }
    }
    return "127.0.0.1";
}

bool Bootstrap::healthy(ibex_status_t *status, std::string *detail) {
    std::lock_guard l(mu_);
    pump();
    if (!failed_) return true;
    *status = fail_status_;
    *detail = fail_detail_;
    return false;
}

void Bootstrap::send_abort(ibex_status_t status, const char *detail) {
    std::lock_guard l(mu_);
    if (failed_) return; // already known everywhere: it came from a peer, or was sent before
    std::string d = "rank " + std::to_string(rank_) + ": " + detail;
    if (rank_ == 0) {
        note_failure(status, d, 0, true);
        return;
    }
    failed_ = true;
    fail_status_ = status;
    fail_detail_ = d;
    std::vector<uint8_t> p;
    put32(p, static_cast<uint32_t>(status));
    put32(p, static_cast<uint32_t>(rank_));
    p.insert(p.end(), d.begin(), d.end());
    if (!conns_.empty()) send_frame(conns_[0], kAbort, p.data(), p.size(), kControlSendMs);
}

void Bootstrap::goodbye(int timeout_ms) {
    {
        std::lock_guard l(mu_);
        closing_ = true;
        if (failed_ || conns_.empty()) return;
        if (rank_ != 0) send_frame(conns_[0], kBye, nullptr, 0, kControlSendMs);
    }
    const ibex_status_t st = wait_for(
        [&] {
            for (const Conn &c : conns_)
                if (!c.bye && !c.closed) return false;
            return true;
        },
        timeout_ms, "goodbye");
    if (st != IBEX_OK) IBEX_LOG(info, "bootstrap: goodbye incomplete: %s", ibex_last_error());
    std::lock_guard l(mu_);
    if (rank_ == 0)
        for (Conn &c : conns_) send_frame(c, kBye, nullptr, 0, kControlSendMs);
}

} // namespace ibex::bootstrap
