#include "transport/soft/udp/udp_port.h"

#include <arpa/inet.h>
#include <cerrno>
#include <cstring>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>
#include <vector>

#include "runtime/base/config.h"
#include "runtime/base/log.h"
#include "runtime/base/status.h"
#include "transport/soft/codec/icrc.h"
#include "transport/soft/codec/icrc_ip_id.h"
#include "transport/soft/codec/roce.h"
#include "transport/soft/tx_copy.h"

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif
#ifndef UDP_GRO
#define UDP_GRO 104
#endif

namespace ibex::soft {
namespace {

constexpr size_t kBatch = 64;
constexpr size_t kGroBufLen = 65536;  // a receive buffer with GRO: room for a train
constexpr size_t kDatagramLen = 9216; // without: one datagram, above any RoCE packet
constexpr size_t kMaxGsoBytes = 65000;
constexpr int kMaxGsoSegments = 64;
constexpr size_t kTxBufLen = 8 * 65536; // copied datagrams of one sendmmsg: eight full trains

// The interface's MTU as the socket's network namespace sees it (/sys shows the namespace
// that mounted it, which a thread that joined another one with setns() does not share).
int netdev_mtu(int fd, const std::string &ifname) {
    ifreq req{};
    std::strncpy(req.ifr_name, ifname.c_str(), IFNAMSIZ - 1);
    if (ioctl(fd, SIOCGIFMTU, &req) == 0 && req.ifr_mtu > 0) return req.ifr_mtu;
    return 1500;
}

// Finds the interface holding `ip` (host order), or the first IPv4 address of `ifname`.
bool lookup_interface(const std::string &ifname, uint32_t *ip, std::string *name_out) {
    ifaddrs *list = nullptr;
    if (getifaddrs(&list) != 0) return false;
    bool found = false;
    for (ifaddrs *a = list; a && !found; a = a->ifa_next) {
        if (!a->ifa_addr || a->ifa_addr->sa_family != AF_INET) continue;
        const uint32_t addr = ntohl(reinterpret_cast<sockaddr_in *>(a->ifa_addr)->sin_addr.s_addr);
        if (!ifname.empty()) {
            if (ifname == a->ifa_name) {
                *ip = addr;
                *name_out = a->ifa_name;
                found = true;
            }
        } else if (addr == *ip) {
            *name_out = a->ifa_name;
            found = true;
        }
    }
    freeifaddrs(list);
    return found;
}

class UdpPort final : public Port {
public:
    UdpPort(int fd, NetAddr local, uint8_t mtu, bool gso, bool gro, bool copy_tx)
        : fd_(fd), local_(local), mtu_(mtu), gso_(gso), gro_(gro), copy_tx_(copy_tx),
          tx_buf_(copy_tx ? kTxBufLen : 0), rx_bufs_(kBatch * (gro ? kGroBufLen : kDatagramLen)) {
        const size_t buf_len = gro ? kGroBufLen : kDatagramLen;
        for (size_t i = 0; i < kBatch; ++i) {
            rx_iov_[i] = {rx_bufs_.data() + i * buf_len, buf_len};
            auto &h = rx_msgs_[i].msg_hdr;
            h.msg_name = &rx_names_[i];
            h.msg_namelen = sizeof(sockaddr_in);
            h.msg_iov = &rx_iov_[i];
            h.msg_iovlen = 1;
            h.msg_control = rx_cmsg_[i];
            h.msg_controllen = sizeof rx_cmsg_[i];
        }
    }
    ~UdpPort() override { close(fd_); }

    NetAddr local() const override { return local_; }
    uint8_t max_mtu() const override { return mtu_; }
    int wait_fd() const override { return fd_; }
    uint64_t tx_dropped() const override { return tx_dropped_; }
    size_t rx_buffer_bytes() const override {
        int v = 0;
        socklen_t len = sizeof v;
        // The kernel reports twice the usable size (it counts its own bookkeeping).
        return getsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &v, &len) == 0 && v > 0 ? size_t(v) / 2 : 0;
    }

    // Long enough for a 64 KB train of 1 KiB packets: one trip through the stack each.
    size_t tx_batch() const override { return gso_ ? kMaxTxBatch : 32; }
    // With GSO a message's middle packets leave and arrive as trains, one trip through the
    // kernel's stack per train; its first and last packets (longer headers than the middle
    // ones, so no train takes them), its ACK and the collective's credit each make a trip
    // of their own, on both ends. A 1 MiB allreduce stream over udp:lo took 44 datagrams
    // per rank and collective with 128 KiB messages and 31 with 512 KiB (perf stat), and
    // 2-rank busbw rose 10-20% from 1 to 16 MiB; across namespaces on veth more.
    size_t efficient_message_bytes() const override { return gso_ ? size_t(512) << 10 : Port::efficient_message_bytes(); }
    uint64_t tx_gso_trains() const override { return tx_trains_; }
    uint64_t rx_gro_trains() const override { return rx_trains_; }
    bool fills_icrc() const override { return copy_tx_; }

    void send(std::span<const TxPacket> pkts) override {
        size_t i = 0;
        while (i < pkts.size()) {
            size_t nmsg = 0;
            size_t niov = 0;
            size_t nicrc = 0;
            const uint8_t batch_tos = pkts[i].tos;
            const int8_t batch_pcp = pkts[i].pcp;
            size_t used = 0; // of tx_buf_
            while (i < pkts.size() && nmsg < kBatch) {
                const TxPacket &p = pkts[i];
                // One more piece than it has for a packet whose ICRC is rewritten.
                if (!copy_tx_ && niov + p.npieces + 1u > tx_iov_.size()) break;
                // The TOS is the socket's (set_tos), so one sendmmsg carries one TOS: a CNP
                // among ECN-capable data would otherwise take their TOS, or they its.
                if (p.tos != batch_tos || p.pcp != batch_pcp) break;
                const size_t run =
                    gso_ ? train_length(pkts.subspan(i), copy_tx_ ? SIZE_MAX : tx_iov_.size() - niov) : 1;
                size_t bytes = 0;
                for (size_t k = 0; k < run; ++k) bytes += pkts[i + k].len;
                if (copy_tx_ && used + bytes > tx_buf_.size()) break; // the next sendmmsg takes it
                mmsghdr &m = tx_msgs_[nmsg];
                std::memset(&m, 0, sizeof m);
                sockaddr_in &sa = tx_names_[nmsg];
                sa.sin_family = AF_INET;
                sa.sin_port = htons(p.dst.port);
                sa.sin_addr.s_addr = htonl(p.dst.ip);
                m.msg_hdr.msg_name = &sa;
                m.msg_hdr.msg_namelen = sizeof sa;
                m.msg_hdr.msg_iov = &tx_iov_[niov];
                if (copy_tx_) {
                    // One piece per datagram: the kernel's copy from a sender's iovecs costs
                    // about 28 ns a piece, and a train of engine pieces has three a packet
                    // (186 for 64 KiB), which doubled its cost of sending a train here.
                    uint8_t *d = tx_buf_.data() + used;
                    for (size_t k = 0; k < run; ++k) d += copy_for_id(pkts[i + k], static_cast<uint16_t>(k), d);
                    tx_iov_[niov++] = {tx_buf_.data() + used, bytes};
                    used += bytes;
                } else {
                    for (int j = 0; j < p.npieces; ++j) tx_iov_[niov++] = p.pieces[j];
                    // The kernel gives the train's segment k IP ID k (the datagram leaves
                    // with ID 0, DF set, from an unconnected socket), and the ICRC covers the ID.
                    for (size_t k = 1; k < run; ++k)
                        add_with_icrc_for_id(pkts[i + k], static_cast<uint16_t>(k), niov, nicrc++);
                }
                m.msg_hdr.msg_iovlen = niov - static_cast<size_t>(m.msg_hdr.msg_iov - tx_iov_.data());
                if (run > 1) {
                    cmsghdr *c = reinterpret_cast<cmsghdr *>(tx_cmsg_[nmsg]);
                    c->cmsg_level = SOL_UDP;
                    c->cmsg_type = UDP_SEGMENT;
                    c->cmsg_len = CMSG_LEN(sizeof(uint16_t));
                    const uint16_t seg = static_cast<uint16_t>(p.len);
                    std::memcpy(CMSG_DATA(c), &seg, sizeof seg);
                    m.msg_hdr.msg_control = c;
                    m.msg_hdr.msg_controllen = CMSG_SPACE(sizeof(uint16_t));
                    ++tx_trains_;
                }
                i += run;
                ++nmsg;
            }
            set_tos(batch_tos);
            set_priority(batch_pcp);
            send_all(nmsg);
        }
    }

    int recv(std::span<RxPacket> out) override {
        size_t n = 0;
        // Deliver what is left of the last receive first (GRO trains can exceed `out`).
        while (n < out.size() && pending_msg_ < pending_count_) n += deliver(out.subspan(n));
        if (n) return static_cast<int>(n);
        for (size_t i = 0; i < kBatch; ++i) {
            rx_msgs_[i].msg_hdr.msg_controllen = sizeof rx_cmsg_[i];
            rx_msgs_[i].msg_hdr.msg_namelen = sizeof(sockaddr_in);
        }
        const size_t want = gro_ ? std::min<size_t>(kBatch, std::max<size_t>(1, out.size() / 8)) : std::min(kBatch, out.size());
        const int r = recvmmsg(fd_, rx_msgs_, static_cast<unsigned>(want), MSG_DONTWAIT, nullptr);
        if (r <= 0) return 0;
        pending_count_ = static_cast<size_t>(r);
        pending_msg_ = 0;
        pending_off_ = 0;
        while (n < out.size() && pending_msg_ < pending_count_) n += deliver(out.subspan(n));
        return static_cast<int>(n);
    }

private:
    // How many packets from the front of `pkts` leave as one GSO train: equal-size packets
    // to one peer with one TOS and priority, optionally ended by one shorter packet; iov_room bounds
    // their pieces (one more each for the rewritten ICRC).
    size_t train_length(std::span<const TxPacket> pkts, size_t iov_room) const {
        const TxPacket &p = pkts[0];
        size_t run = 1, bytes = p.len, pieces = p.npieces;
        while (run < pkts.size() && run < kMaxGsoSegments) {
            const TxPacket &q = pkts[run];
            if (!(q.dst == p.dst) || q.tos != p.tos || q.pcp != p.pcp || q.len > p.len || bytes + q.len > kMaxGsoBytes ||
                pieces + q.npieces + 1u > iov_room)
                break;
            if (q.len < p.len) {
                // A shorter packet may end a train, but not make one with just the packet
                // before it (a FIRST with its longer header) where it would start a train
                // of its own length (the MIDDLEs of a longer message).
                const bool starts_train = run + 1 < pkts.size() && pkts[run + 1].len == q.len;
                if (run > 1 || !starts_train) ++run;
                break;
            }
            bytes += q.len;
            pieces += q.npieces + 1u;
            ++run;
        }
        return run;
    }

    // Copies `q` to d as segment `id` of its train (IP ID `id`) leaves: with its ICRC made
    // on the way where the engine left it to the port, else as the engine made it (IP ID 0,
    // or corrupted on purpose by fault injection), changed for the ID. Returns q.len.
    size_t copy_for_id(const TxPacket &q, uint16_t id, uint8_t *d) {
        const size_t covered = q.len - roce::kIcrcLen;
        uint32_t icrc;
        if (q.icrc_pending) {
            icrc = copy_with_icrc(d, q, tx_icrc_fields(local_, q.dst), tx_icrc_prefix_);
        } else {
            gather_packet(d, q);
            icrc = roce::load_icrc(d + covered);
        }
        if (id) roce::store_icrc(d + covered, icrc ^ tx_icrc_shift_.delta(id, covered));
        return q.len;
    }

    // Appends the pieces of `q` with its last 4 bytes, the ICRC made for IP ID 0, replaced
    // by the ICRC for IP ID `id`, kept in tx_icrc_[slot].
    void add_with_icrc_for_id(const TxPacket &q, uint16_t id, size_t &niov, size_t slot) {
        size_t keep = q.len - roce::kIcrcLen; // bytes before the ICRC
        uint8_t *icrc = tx_icrc_[slot];
        size_t have = 0;
        for (int j = 0; j < q.npieces; ++j) {
            const auto *base = static_cast<uint8_t *>(q.pieces[j].iov_base);
            const size_t len = q.pieces[j].iov_len;
            const size_t head = std::min(len, keep);
            if (head) tx_iov_[niov++] = {const_cast<uint8_t *>(base), head};
            keep -= head;
            for (size_t b = head; b < len && have < roce::kIcrcLen; ++b) icrc[have++] = base[b];
        }
        roce::store_icrc(icrc, roce::load_icrc(icrc) ^ tx_icrc_shift_.delta(id, q.len - roce::kIcrcLen));
        tx_iov_[niov++] = {icrc, roce::kIcrcLen};
    }

    void set_tos(uint8_t tos) {
        if (tos == tos_) return;
        int v = tos;
        if (setsockopt(fd_, IPPROTO_IP, IP_TOS, &v, sizeof v) != 0) return;
        tos_ = tos;
        priority_ = -1; // a new TOS resets the socket's priority to the kernel's choice for it
    }

    // The socket's priority: the QP's service level (-1: none set, the kernel's own), which a
    // VLAN device's egress-qos-map turns into the tag's PCP, as an RNIC tags with the SL.
    void set_priority(int8_t sl) {
        if (sl == priority_) return;
        if (priority_ < 0) {
            // The kernel's choice for the TOS, kept before a level replaces it, so that
            // packets of QPs without one go out with it again (only ports with such QPs
            // pay for this call).
            socklen_t len = sizeof tos_priority_;
            if (getsockopt(fd_, SOL_SOCKET, SO_PRIORITY, &tos_priority_, &len) != 0) tos_priority_ = 0;
        }
        int v = sl >= 0 ? sl : tos_priority_;
        if (setsockopt(fd_, SOL_SOCKET, SO_PRIORITY, &v, sizeof v) == 0) priority_ = sl;
    }

    void send_all(size_t nmsg) {
        size_t done = 0;
        for (int attempt = 0; done < nmsg && attempt < 100; ++attempt) {
            const int r = sendmmsg(fd_, tx_msgs_ + done, static_cast<unsigned>(nmsg - done), 0);
            if (r > 0) {
                done += static_cast<size_t>(r);
                continue;
            }
            if (errno == EAGAIN || errno == ENOBUFS || errno == EINTR) {
                pollfd pfd{fd_, POLLOUT, 0};
                poll(&pfd, 1, 1);
                continue;
            }
            // The packet cannot leave (EMSGSIZE, unreachable, ...): the wire drops it
            // and the reliability layer decides what happens next.
            const bool train = tx_msgs_[done].msg_hdr.msg_controllen != 0;
            if (train && (errno == EIO || errno == EINVAL) && gso_) {
                // The route's device cannot take a GSO datagram (no checksum offload, a
                // transform): this train is lost and the rest leave one packet at a time.
                IBEX_LOG(warn, "udp port: the kernel refuses UDP GSO here (%s); sending without it", strerror(errno));
                gso_ = false;
            } else if (tx_errors_++ == 0) {
                IBEX_LOG(warn, "udp port: sendmmsg failed: %s (errno %d)", strerror(errno), errno);
            }
            ++done;
            ++tx_dropped_;
        }
        tx_dropped_ += nmsg - done;
    }

    // Splits received datagram pending_msg_ (a GRO train or one packet) into `out`.
    size_t deliver(std::span<RxPacket> out) {
        const mmsghdr &m = rx_msgs_[pending_msg_];
        uint8_t tos = 0;
        size_t seg = m.msg_len;
        for (cmsghdr *c = CMSG_FIRSTHDR(&m.msg_hdr); c; c = CMSG_NXTHDR(const_cast<msghdr *>(&m.msg_hdr), c)) {
            if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_TOS) tos = *CMSG_DATA(c);
            if (c->cmsg_level == SOL_UDP && c->cmsg_type == UDP_GRO) {
                int s;
                std::memcpy(&s, CMSG_DATA(c), sizeof s);
                if (s > 0) seg = static_cast<size_t>(s);
            }
        }
        const auto *sa = &rx_names_[pending_msg_];
        const uint8_t *base = static_cast<const uint8_t *>(m.msg_hdr.msg_iov->iov_base);
        if (pending_off_ == 0 && seg < m.msg_len) ++rx_trains_;
        size_t n = 0;
        while (n < out.size() && pending_off_ < m.msg_len) {
            RxPacket &p = out[n++];
            p.data = base + pending_off_;
            p.len = static_cast<uint32_t>(std::min(seg, m.msg_len - pending_off_));
            p.src = {ntohl(sa->sin_addr.s_addr), ntohs(sa->sin_port)};
            p.dst = local_;
            // The IP header is not ours to see: a GRO train is most likely the sender's GSO
            // train whole, whose segment k had ID k.
            p.ip_id = static_cast<uint16_t>(pending_off_ / seg);
            p.ip_id_guessed = true;
            p.ip_frag = 0x4000;
            p.tos = tos;
            pending_off_ += p.len;
        }
        if (pending_off_ >= m.msg_len) {
            ++pending_msg_;
            pending_off_ = 0;
        }
        return n;
    }

    int fd_;
    NetAddr local_;
    uint8_t mtu_;
    bool gso_;
    bool gro_;
    bool copy_tx_; // datagrams leave from tx_buf_, one piece each (fills_icrc)
    int tos_ = -1;
    int tos_priority_ = 0; // the socket priority the kernel gave the current TOS (read lazily)
    int8_t priority_ = -1; // the service level the socket's priority is; -1: tos_priority_
    uint64_t tx_dropped_ = 0;
    uint64_t tx_errors_ = 0;

    mmsghdr tx_msgs_[kBatch];
    sockaddr_in tx_names_[kBatch];
    alignas(cmsghdr) uint8_t tx_cmsg_[kBatch][CMSG_SPACE(sizeof(uint16_t))];
    std::array<iovec, kBatch * 24> tx_iov_;
    uint8_t tx_icrc_[kBatch * 24][roce::kIcrcLen];
    roce::IcrcIpIdShift tx_icrc_shift_;
    roce::IcrcPrefixCache tx_icrc_prefix_;
    std::vector<uint8_t> tx_buf_;
    uint64_t tx_trains_ = 0;
    uint64_t rx_trains_ = 0;

    std::vector<uint8_t> rx_bufs_;
    mmsghdr rx_msgs_[kBatch];
    iovec rx_iov_[kBatch];
    sockaddr_in rx_names_[kBatch];
    alignas(cmsghdr) uint8_t rx_cmsg_[kBatch][CMSG_SPACE(sizeof(int)) * 2 + 32];
    size_t pending_count_ = 0;
    size_t pending_msg_ = 0;
    size_t pending_off_ = 0;
};

int try_bind(uint32_t ip, uint16_t port, int *err) {
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        *err = errno;
        return -1;
    }
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(port);
    sa.sin_addr.s_addr = htonl(ip);
    if (bind(fd, reinterpret_cast<sockaddr *>(&sa), sizeof sa) != 0) {
        *err = errno;
        close(fd);
        return -1;
    }
    return fd;
}

} // namespace

bool is_udp_device(const char *device) { return device && std::strncmp(device, "udp:", 4) == 0; }

std::unique_ptr<Port> open_udp_port(const UdpPortOptions &opts, ibex_status_t *status) {
    // Device: udp:<ifname | IPv4>[:port]
    std::string spec = opts.device.substr(4);
    uint16_t port = roce::kUdpPort;
    if (auto colon = spec.find(':'); colon != std::string::npos) {
        port = static_cast<uint16_t>(std::strtoul(spec.c_str() + colon + 1, nullptr, 10));
        spec.resize(colon);
    }
    if (opts.port) port = opts.port;
    std::string addr_text = opts.local_addr.empty() ? std::string(config::get_string("IBEX_UDP_ADDR", "")) : opts.local_addr;

    uint32_t ip = 0;
    std::string ifname;
    bool explicit_addr = false;
    in_addr a{};
    if (!addr_text.empty()) {
        if (inet_pton(AF_INET, addr_text.c_str(), &a) != 1) {
            *status = fail(IBEX_ERR_INVALID_ARGUMENT, "udp port: local address \"%s\" is not an IPv4 address", addr_text.c_str());
            return nullptr;
        }
        ip = ntohl(a.s_addr);
        explicit_addr = true;
    } else if (inet_pton(AF_INET, spec.c_str(), &a) == 1) {
        ip = ntohl(a.s_addr);
        explicit_addr = true;
    } else if (!lookup_interface(spec, &ip, &ifname)) {
        *status = fail(IBEX_ERR_NO_DEVICE, "udp port: no IPv4 interface named \"%s\" (device \"%s\")", spec.c_str(),
                       opts.device.c_str());
        return nullptr;
    }
    const bool loopback = (ip >> 24) == 127;
    if (explicit_addr && !loopback && !lookup_interface("", &ip, &ifname)) {
        in_addr show{htonl(ip)};
        *status = fail(IBEX_ERR_NO_DEVICE, "udp port: address %s is not configured on this host", inet_ntoa(show));
        return nullptr;
    }
    if (loopback) ifname = "lo";

    int err = 0;
    int fd = try_bind(ip, port, &err);
    // Several processes on one host each take their own loopback address, so every
    // context keeps UDP port 4791 as RoCEv2 wants.
    if (fd < 0 && err == EADDRINUSE && loopback && !explicit_addr) {
        for (uint32_t host = 2; host < 255 && fd < 0; ++host) fd = try_bind((127u << 24) | host, port, &err), ip = (127u << 24) | host;
    }
    if (fd < 0) {
        in_addr show{htonl(ip)};
        *status = fail_errno(err == EADDRINUSE ? IBEX_ERR_ADDRESS_IN_USE : IBEX_ERR_SYSTEM, err,
                             "udp port: cannot bind %s:%u", inet_ntoa(show), port);
        return nullptr;
    }
    int one = 1;
    int pmtu = IP_PMTUDISC_DO; // DF set; with an unconnected socket the kernel leaves IP ID at 0
    setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof pmtu);
    setsockopt(fd, IPPROTO_IP, IP_RECVTOS, &one, sizeof one);
    int buf = opts.socket_buffer;
    if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &buf, sizeof buf) != 0)
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf);
    if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &buf, sizeof buf) != 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof buf);
    bool gro = opts.gro && config::get_bool("IBEX_UDP_GRO", true);
    if (gro && setsockopt(fd, SOL_UDP, UDP_GRO, &one, sizeof one) != 0) gro = false;
    // GSO on every interface: where the train is cut (software GSO on a device without UDP
    // segmentation, or a receiver without UDP_GRO), segment k gets IP ID k and was sent
    // with its ICRC for that ID; a GRO receiver takes the train whole.
    const bool gso = opts.gso && config::get_bool("IBEX_UDP_GSO", true);

    sockaddr_in bound{};
    socklen_t len = sizeof bound;
    getsockname(fd, reinterpret_cast<sockaddr *>(&bound), &len);
    NetAddr local{ntohl(bound.sin_addr.s_addr), ntohs(bound.sin_port)};
    uint8_t mtu = roce::mtu_enum_for_netdev(loopback ? 65536 : netdev_mtu(fd, ifname));
    if (!mtu) mtu = IBEX_MTU_256;
    IBEX_LOG(info, "udp port on %s (%s) local %u.%u.%u.%u:%u mtu %d gso %d gro %d", opts.device.c_str(), ifname.c_str(),
             local.ip >> 24, (local.ip >> 16) & 255, (local.ip >> 8) & 255, local.ip & 255, local.port,
             roce::mtu_bytes(mtu), gso, gro);
    *status = IBEX_OK;
    // Datagrams copied into one piece each (the ICRC made in the same pass) unless turned off.
    const bool copy_tx = config::get_bool("IBEX_UDP_TX_COPY", true);
    return std::make_unique<UdpPort>(fd, local, mtu, gso, gro, copy_tx);
}

} // namespace ibex::soft
