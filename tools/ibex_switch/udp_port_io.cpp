#include "tools/ibex_switch/udp_port_io.h"

#include <arpa/inet.h>
#include <cerrno>
#include <cstring>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include <vector>

namespace ibex::sw {
namespace {

constexpr int kBatch = 32;
constexpr size_t kFrameBytes = 9216; // above any RoCE MTU plus headers

class UdpPortIo final : public PortIo {
public:
    UdpPortIo(int fd, Addr local) : fd_(fd), local_(local), bufs_(kBatch * kFrameBytes) {
        for (int i = 0; i < kBatch; ++i) {
            iov_[i] = {bufs_.data() + size_t(i) * kFrameBytes, kFrameBytes};
            msgs_[i].msg_hdr.msg_iov = &iov_[i];
            msgs_[i].msg_hdr.msg_iovlen = 1;
        }
    }
    ~UdpPortIo() override { close(fd_); }

    Addr local() const override { return local_; }
    int wait_fd() const override { return fd_; }

    int recv(std::span<Frame> out) override {
        const int want = static_cast<int>(std::min<size_t>(out.size(), kBatch));
        for (int i = 0; i < want; ++i) {
            msghdr &h = msgs_[i].msg_hdr;
            h.msg_name = &names_[i];
            h.msg_namelen = sizeof names_[i];
            h.msg_control = ctrl_[i];
            h.msg_controllen = sizeof ctrl_[i];
            h.msg_flags = 0;
        }
        const int n = recvmmsg(fd_, msgs_, static_cast<unsigned>(want), MSG_DONTWAIT, nullptr);
        if (n <= 0) return 0;
        for (int i = 0; i < n; ++i) {
            Frame &f = out[i];
            f.data = static_cast<uint8_t *>(iov_[i].iov_base);
            f.len = msgs_[i].msg_len;
            f.src = {ntohl(names_[i].sin_addr.s_addr), ntohs(names_[i].sin_port)};
            f.tos = 0;
            msghdr &h = msgs_[i].msg_hdr;
            for (cmsghdr *c = CMSG_FIRSTHDR(&h); c; c = CMSG_NXTHDR(&h, c))
                if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_TOS) f.tos = *CMSG_DATA(c);
        }
        return n;
    }

    bool send(const uint8_t *data, uint32_t len, const Addr &to, uint8_t tos) override {
        sockaddr_in sa{};
        sa.sin_family = AF_INET;
        sa.sin_port = htons(to.port);
        sa.sin_addr.s_addr = htonl(to.ip);
        iovec iov{const_cast<uint8_t *>(data), len};
        alignas(cmsghdr) char ctrl[CMSG_SPACE(sizeof(int))]{};
        msghdr h{};
        h.msg_name = &sa;
        h.msg_namelen = sizeof sa;
        h.msg_iov = &iov;
        h.msg_iovlen = 1;
        h.msg_control = ctrl;
        h.msg_controllen = sizeof ctrl;
        cmsghdr *c = CMSG_FIRSTHDR(&h);
        c->cmsg_level = IPPROTO_IP;
        c->cmsg_type = IP_TOS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        const int v = tos;
        std::memcpy(CMSG_DATA(c), &v, sizeof v);
        for (int tries = 0; tries < 3; ++tries) {
            if (sendmsg(fd_, &h, 0) == static_cast<ssize_t>(len)) return true;
            if (errno != EAGAIN && errno != ENOBUFS && errno != EINTR) return false;
        }
        return false;
    }

private:
    int fd_;
    Addr local_;
    std::vector<uint8_t> bufs_;
    iovec iov_[kBatch];
    mmsghdr msgs_[kBatch]{};
    sockaddr_in names_[kBatch]{};
    alignas(cmsghdr) char ctrl_[kBatch][CMSG_SPACE(sizeof(int)) * 2];
};

} // namespace

std::unique_ptr<PortIo> open_udp_port_io(const Addr &local, std::string &err) {
    const int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        err = std::string("socket: ") + strerror(errno);
        return nullptr;
    }
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(local.port);
    sa.sin_addr.s_addr = htonl(local.ip);
    if (bind(fd, reinterpret_cast<sockaddr *>(&sa), sizeof sa) != 0) {
        err = "bind " + format_addr(local) + ": " + strerror(errno);
        close(fd);
        return nullptr;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_IP, IP_RECVTOS, &one, sizeof one);
    // DF set from an unconnected socket: IP ID 0, as the endpoints' ICRC expects.
    int pmtu = IP_PMTUDISC_DO;
    setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof pmtu);
    // The switch's own buffer is what it models; the kernel's should only absorb a
    // scheduling hiccup of the switch thread.
    int buf = 4 << 20;
    if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &buf, sizeof buf) != 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof buf);
    if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &buf, sizeof buf) != 0)
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf);
    socklen_t len = sizeof sa;
    getsockname(fd, reinterpret_cast<sockaddr *>(&sa), &len);
    return std::make_unique<UdpPortIo>(fd, Addr{ntohl(sa.sin_addr.s_addr), ntohs(sa.sin_port)});
}

bool parse_addr(const std::string &text, Addr &out) {
    const size_t colon = text.rfind(':');
    const std::string host = colon == std::string::npos ? text : text.substr(0, colon);
    in_addr a{};
    if (inet_pton(AF_INET, host.c_str(), &a) != 1) return false;
    out.ip = ntohl(a.s_addr);
    out.port = 4791;
    if (colon != std::string::npos) {
        char *end = nullptr;
        const long p = std::strtol(text.c_str() + colon + 1, &end, 10);
        if (*end || p < 0 || p > 65535) return false;
        out.port = static_cast<uint16_t>(p);
    }
    return true;
}

std::string format_addr(const Addr &a) {
    char b[32];
    std::snprintf(b, sizeof b, "%u.%u.%u.%u:%u", a.ip >> 24, (a.ip >> 16) & 255, (a.ip >> 8) & 255, a.ip & 255, a.port);
    return b;
}

} // namespace ibex::sw
