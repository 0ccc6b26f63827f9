// listen / connect / accept: NCCL's handle carries the listener's TCP address and a
// token; the two sides swap their QP addresses over that connection and close it. Every
// step is non-blocking, because NCCL's proxy thread calls connect and accept repeatedly
// (one side's connect may be waiting on the other side's accept, on the same thread).
//
//   connect (sender)                      accept (receiver)
//   TCP connect, send {token, QP addr} -> accept, check token, connect QP, post FIN slots
//   connect QP, post CTS slots        <- send {token, QP addr}
//   send "ready"                      -> "ready": the sender can take CTS messages
#include <arpa/inet.h>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <random>
#include <sys/socket.h>
#include <unistd.h>

#include "plugins/nccl-net/state.h"

namespace ibex_nccl {
namespace {

struct Handle {
    uint32_t magic;
    uint32_t reserved;
    sockaddr_in addr;
    uint64_t token;
    void *connecting; // the send comm connect() is building, across its calls
};
static_assert(sizeof(Handle) <= NCCL_NET_HANDLE_MAXSIZE, "NCCL carries 128 bytes");

struct PeerInfo {
    uint32_t magic;
    uint32_t reserved;
    uint64_t token;
    uint8_t ep[IBEX_EP_ADDR_WIRE_LEN];
};
static_assert(sizeof(PeerInfo) <= sizeof(Comm::peer_info));

uint64_t random_token() {
    std::random_device rd;
    return (uint64_t{rd()} << 32) | rd();
}

int nonblocking_socket() {
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd >= 0) {
        int one = 1;
        (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    }
    return fd;
}

ncclResult_t system_failure(const char *what) {
    IBEX_NCCL_WARN("NET/IBEX : %s: %s", what, std::strerror(errno));
    return ncclSystemError;
}

// The comm's QP address with the token, in the comm's info buffer form.
bool local_info(Comm &c, PeerInfo *info) {
    ibex_ep_addr_t ep{};
    if (ibex_qp_local_addr(c.qp, &ep) != IBEX_OK ||
        ibex_ep_addr_pack(&ep, info->ep, sizeof(info->ep)) != IBEX_OK) {
        IBEX_NCCL_WARN("NET/IBEX : QP address: %s", ibex_last_error());
        return false;
    }
    info->magic = kMagic;
    info->reserved = 0;
    info->token = c.token;
    return true;
}

// Sends a small message whole or not at all (a fresh socket's buffer takes it).
bool send_small(int fd, const void *data, size_t len) {
    return send(fd, data, len, MSG_NOSIGNAL) == static_cast<ssize_t>(len);
}

bool send_local_info(Comm &c) {
    PeerInfo mine{};
    return local_info(c, &mine) && send_small(c.fd, &mine, sizeof(mine));
}

// Reads the peer's info as it arrives: 1 once complete, 0 while partial, -1 on failure.
int receive_info(Comm &c, size_t want) {
    while (c.peer_info_got < want) {
        const ssize_t n = recv(c.fd, c.peer_info.data() + c.peer_info_got, want - c.peer_info_got, 0);
        if (n > 0) {
            c.peer_info_got += static_cast<size_t>(n);
            continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return 0;
        IBEX_NCCL_WARN("NET/IBEX : connection set-up: the peer closed or failed (%s)",
                       n == 0 ? "closed" : std::strerror(errno));
        return -1;
    }
    return 1;
}

// Checks the peer's info and connects the QP to it.
bool connect_qp(Comm &c) {
    PeerInfo peer{};
    std::memcpy(&peer, c.peer_info.data(), sizeof(peer));
    if (peer.magic != kMagic || peer.token != c.token) {
        IBEX_NCCL_WARN("NET/IBEX : connection set-up: a peer with the wrong token (another job?)");
        return false;
    }
    ibex_ep_addr_t ep{};
    const QpKnobs knobs = qp_knobs(c.traffic_class);
    if (ibex_ep_addr_unpack(peer.ep, sizeof(peer.ep), &ep) != IBEX_OK ||
        ibex_qp_connect_attr(c.qp, &ep, &knobs.attr, knobs.mask) != IBEX_OK) {
        IBEX_NCCL_WARN("NET/IBEX : connecting the QP: %s", ibex_last_error());
        return false;
    }
    ibex_qp_attr_t q = IBEX_QP_ATTR_INIT;
    if (ibex_query_qp(c.qp, &q) == IBEX_OK)
        IBEX_NCCL_INFO("NET/IBEX : %s QP 0x%x connected: timeout %u, retry_cnt %u, sl %u, traffic class %u",
                       c.is_send ? "send" : "recv", q.qp_num, q.timeout, q.retry_cnt, q.sl, q.traffic_class);
    return true;
}

// Both sides' middle step: take the peer's info as it arrives (0: not yet), then
// connect the QP and post the control receives (1: done, -1: failed).
int take_peer_and_connect(Comm &c) {
    const int got = receive_info(c, sizeof(PeerInfo));
    if (got <= 0)
        return got;
    return connect_qp(c) && post_control_receives(c) == ncclSuccess ? 1 : -1;
}

void finish_setup(Comm &c) {
    close(c.fd);
    c.fd = -1;
    c.step = SetupStep::Done;
}

} // namespace

ncclResult_t listen(int dev, void *handle, void **listen_comm) {
    if (handle == nullptr || listen_comm == nullptr)
        return ncclInvalidArgument;
    std::lock_guard<std::mutex> lock(plugin().mu);
    if (device_pd(dev, nullptr) == nullptr)
        return ncclInvalidArgument;
    const int fd = nonblocking_socket();
    if (fd < 0)
        return system_failure("socket");
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = device_socket_addr(dev);
    socklen_t len = sizeof(addr);
    if (bind(fd, reinterpret_cast<sockaddr *>(&addr), sizeof(addr)) != 0 ||
        ::listen(fd, 128) != 0 || getsockname(fd, reinterpret_cast<sockaddr *>(&addr), &len) != 0) {
        const ncclResult_t r = system_failure("listen");
        close(fd);
        return r;
    }
    auto [h, l] = plugin().listens.add();
    if (h == nullptr) {
        close(fd);
        IBEX_NCCL_WARN("NET/IBEX : too many listening comms");
        return ncclSystemError;
    }
    l->dev = dev;
    l->fd = fd;
    l->token = random_token();
    Handle out{kMagic, 0, addr, l->token, nullptr};
    std::memset(handle, 0, NCCL_NET_HANDLE_MAXSIZE);
    std::memcpy(handle, &out, sizeof(out));
    *listen_comm = h;
    return ncclSuccess;
}

ncclResult_t connect(int dev, void *handle_bytes, void **send_comm, int traffic_class) {
    if (handle_bytes == nullptr || send_comm == nullptr)
        return ncclInvalidArgument;
    *send_comm = nullptr;
    std::lock_guard<std::mutex> lock(plugin().mu);
    Plugin &p = plugin();
    Handle handle{};
    std::memcpy(&handle, handle_bytes, sizeof(handle));
    if (handle.magic != kMagic) {
        IBEX_NCCL_WARN("NET/IBEX : connect: not an ibex handle");
        return ncclInvalidArgument;
    }
    Comm *c = handle.connecting != nullptr ? p.sends.get(handle.connecting) : nullptr;
    void *h = handle.connecting;
    auto fail = [&](ncclResult_t r) {
        if (c != nullptr)
            release_comm(*c, h);
        p.sends.remove(h);
        handle.connecting = nullptr;
        std::memcpy(handle_bytes, &handle, sizeof(handle));
        return r;
    };
    if (c == nullptr) { // first call: build the comm, start the TCP connect
        auto [nh, nc] = p.sends.add();
        if (nh == nullptr) {
            IBEX_NCCL_WARN("NET/IBEX : too many send comms");
            return ncclSystemError;
        }
        h = nh;
        c = nc;
        c->is_send = true;
        c->dev = dev;
        c->traffic_class = traffic_class;
        c->token = handle.token;
        if (const ncclResult_t r = create_comm_resources(*c); r != ncclSuccess)
            return fail(r);
        c->fd = nonblocking_socket();
        if (c->fd < 0)
            return fail(system_failure("socket"));
        if (::connect(c->fd, reinterpret_cast<const sockaddr *>(&handle.addr),
                      sizeof(handle.addr)) != 0 && errno != EINPROGRESS)
            return fail(system_failure("connect"));
        c->step = SetupStep::Connecting;
        handle.connecting = h;
        std::memcpy(handle_bytes, &handle, sizeof(handle));
        return ncclSuccess;
    }
    if (c->step == SetupStep::Connecting) {
        pollfd pfd{c->fd, POLLOUT, 0};
        if (poll(&pfd, 1, 0) == 0)
            return ncclSuccess;
        int error = 0;
        socklen_t len = sizeof(error);
        (void)getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &error, &len);
        if (error != 0) {
            errno = error;
            return fail(system_failure("connect to the listener"));
        }
        if (!send_local_info(*c))
            return fail(system_failure("send the QP address"));
        c->step = SetupStep::ExchangingInfo;
    }
    if (c->step == SetupStep::ExchangingInfo) {
        const int got = take_peer_and_connect(*c);
        if (got == 0)
            return ncclSuccess;
        if (got < 0)
            return fail(ncclSystemError);
        const uint8_t ready = 1;
        if (!send_small(c->fd, &ready, 1))
            return fail(system_failure("send ready"));
        finish_setup(*c);
        handle.connecting = nullptr;
        std::memcpy(handle_bytes, &handle, sizeof(handle));
        *send_comm = h;
    }
    return ncclSuccess;
}

ncclResult_t accept(void *listen_comm, void **recv_comm) {
    if (recv_comm == nullptr)
        return ncclInvalidArgument;
    *recv_comm = nullptr;
    std::lock_guard<std::mutex> lock(plugin().mu);
    Plugin &p = plugin();
    ListenComm *l = p.listens.get(listen_comm);
    if (l == nullptr) {
        IBEX_NCCL_WARN("NET/IBEX : accept: stale or invalid listen comm %p", listen_comm);
        return ncclInvalidArgument;
    }
    Comm *c = l->pending != nullptr ? p.recvs.get(l->pending) : nullptr;
    void *h = l->pending;
    auto drop = [&](ncclResult_t r) { // a bad connection: forget it, keep listening
        if (c != nullptr)
            release_comm(*c, h);
        p.recvs.remove(h);
        l->pending = nullptr;
        return r;
    };
    if (c == nullptr) {
        const int fd = accept4(l->fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0)
            return errno == EAGAIN || errno == EWOULDBLOCK ? ncclSuccess : system_failure("accept");
        auto [nh, nc] = p.recvs.add();
        if (nh == nullptr) {
            close(fd);
            IBEX_NCCL_WARN("NET/IBEX : too many receive comms");
            return ncclSystemError;
        }
        h = nh;
        c = nc;
        c->dev = l->dev;
        c->fd = fd;
        c->token = l->token;
        l->pending = h;
        if (const ncclResult_t r = create_comm_resources(*c); r != ncclSuccess)
            return drop(r);
        c->step = SetupStep::ExchangingInfo;
    }
    if (c->step == SetupStep::ExchangingInfo) {
        const int got = take_peer_and_connect(*c);
        if (got == 0)
            return ncclSuccess;
        if (got < 0)
            return drop(ncclSuccess); // a stray or failed connector: wait for the next
        if (!send_local_info(*c))
            return drop(ncclSuccess);
        c->step = SetupStep::AwaitingReady;
        c->peer_info_got = 0;
    }
    if (c->step == SetupStep::AwaitingReady) {
        const int got = receive_info(*c, 1);
        if (got == 0)
            return ncclSuccess;
        if (got < 0)
            return drop(ncclSuccess);
        finish_setup(*c);
        l->pending = nullptr;
        *recv_comm = h;
    }
    return ncclSuccess;
}

ncclResult_t close_listen(void *listen_comm) {
    std::lock_guard<std::mutex> lock(plugin().mu);
    Plugin &p = plugin();
    ListenComm *l = p.listens.get(listen_comm);
    if (l == nullptr) {
        IBEX_NCCL_WARN("NET/IBEX : closeListen: stale or invalid listen comm %p", listen_comm);
        return ncclInvalidArgument;
    }
    if (Comm *c = l->pending != nullptr ? p.recvs.get(l->pending) : nullptr) {
        release_comm(*c, l->pending);
        p.recvs.remove(l->pending);
    }
    close(l->fd);
    p.listens.remove(listen_comm);
    return ncclSuccess;
}

} // namespace ibex_nccl
