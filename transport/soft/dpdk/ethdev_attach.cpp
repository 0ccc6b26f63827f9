#include "transport/soft/dpdk/ethdev_attach.h"

#include <algorithm>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <memory>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <rte_bus_vdev.h>
#include <rte_dev.h>
#include <rte_errno.h>
#include <rte_ethdev.h>

#include "runtime/base/config.h"
#include "runtime/base/log.h"
#include "runtime/base/status.h"

namespace ibex::soft::dpdk {
namespace {

std::atomic<unsigned> g_port_seq{0};

// True for "<pid>.<n>.starting" (two numbers): a name memif_starting_name() made.
bool is_starting_suffix(const std::string &s, pid_t *pid) {
    const size_t dot1 = s.find('.');
    const size_t dot2 = dot1 == std::string::npos ? dot1 : s.find('.', dot1 + 1);
    if (dot2 == std::string::npos || s.compare(dot2, std::string::npos, ".starting") != 0) return false;
    auto digits = [&](size_t from, size_t to) {
        if (from == to) return false;
        for (size_t i = from; i < to; ++i)
            if (s[i] < '0' || s[i] > '9') return false;
        return true;
    };
    if (dot1 > 9 || !digits(0, dot1) || !digits(dot1 + 1, dot2)) return false;
    *pid = static_cast<pid_t>(std::stol(s.substr(0, dot1)));
    return true;
}

} // namespace

std::string memif_starting_name(const std::string &sock, unsigned seq) {
    return sock + "." + std::to_string(getpid()) + "." + std::to_string(seq) + ".starting";
}

void remove_stale_starting_names(const std::string &sock) {
    const size_t slash = sock.rfind('/');
    const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : sock.substr(0, slash);
    const std::string prefix = (slash == std::string::npos ? sock : sock.substr(slash + 1)) + ".";
    DIR *d = opendir(dir.c_str());
    if (!d) return;
    while (const dirent *e = readdir(d)) {
        const std::string name = e->d_name;
        pid_t pid = 0;
        if (name.compare(0, prefix.size(), prefix) != 0 || !is_starting_suffix(name.substr(prefix.size()), &pid)) continue;
        if (kill(pid, 0) == 0 || errno != ESRCH) continue; // its server may still be starting
        unlink((dir + "/" + name).c_str());
    }
    closedir(d);
}

// By ioctl, not sysfs: /sys shows the namespace it was mounted in, not the caller's.
int netdev_mtu(const std::string &ifname) {
    const int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return 0;
    ifreq r{};
    std::strncpy(r.ifr_name, ifname.c_str(), IFNAMSIZ - 1);
    const int mtu = ioctl(fd, SIOCGIFMTU, &r) == 0 ? r.ifr_mtu : 0;
    close(fd);
    return mtu;
}

namespace {

// The XDP program an af_xdp port loads: IBEX_DPDK_XDP_PROG ("default": the PMD's own),
// else the RoCE-only program of this build, else the installed one; "" for the PMD's.
std::string xdp_program() {
    const std::string env = config::get_string("IBEX_DPDK_XDP_PROG", "");
    if (env == "default") return "";
    if (!env.empty()) return env;
#ifdef IBEX_XDP_ROCE_PROG
    for (const char *p : {IBEX_XDP_ROCE_PROG, IBEX_XDP_ROCE_PROG_INSTALLED})
        if (access(p, R_OK) == 0) return p;
#endif
    return "";
}

} // namespace

// af_packet's ring frame for this MTU (a power of two); the mbufs must hold one whole.
uint32_t af_packet_frame(int mtu) {
    uint32_t f = 2048;
    while (f < uint32_t(mtu) + 256) f <<= 1;
    return f;
}

uint32_t netdev_ipv4(const std::string &ifname) {
    ifaddrs *list = nullptr;
    if (getifaddrs(&list) != 0) return 0;
    uint32_t ip = 0;
    for (ifaddrs *a = list; a && !ip; a = a->ifa_next)
        if (a->ifa_addr && a->ifa_addr->sa_family == AF_INET && ifname == a->ifa_name)
            ip = ntohl(reinterpret_cast<sockaddr_in *>(a->ifa_addr)->sin_addr.s_addr);
    freeifaddrs(list);
    return ip;
}

void close_device(void *p) {
    std::unique_ptr<Opened> o(static_cast<Opened *>(p));
    rte_eth_dev_stop(o->port_id);
    rte_eth_dev_close(o->port_id);
    if (!o->vdev_name.empty()) rte_vdev_uninit(o->vdev_name.c_str());
}

// Creates (or finds) the ethdev the spec names; fills o.port_id.
ibex_status_t attach_device(const DeviceSpec &spec, const std::string &device, Opened *o) {
    const unsigned seq = g_port_seq++;
    std::string name, args;
    switch (spec.target) {
    case Target::kMemif: {
        std::string sock = spec.name;
        if (sock.empty()) sock = config::get_string("IBEX_DPDK_MEMIF_SOCKET", "/tmp/ibex-memif.sock");
        MemifRole role = spec.role;
        if (role == MemifRole::kAuto) {
            const std::string r = config::get_string("IBEX_DPDK_MEMIF_ROLE", "auto");
            role = r == "server" ? MemifRole::kServer : r == "client" ? MemifRole::kClient : MemifRole::kAuto;
        }
        if (role != MemifRole::kClient) {
            // A server holds "<socket>.lock" while its port lives. With no role given, the
            // first opener serves and a later one finds the lock taken and connects; a
            // server by name that finds it taken says who has it. (Probing the socket by
            // connecting to it would upset the memif server that answers.)
            o->lock_path = sock + ".lock";
            o->lock_fd = open(o->lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
            if (o->lock_fd < 0)
                return fail_errno(IBEX_ERR_SYSTEM, errno, "%s: cannot open %s.lock", device.c_str(), sock.c_str());
            if (flock(o->lock_fd, LOCK_EX | LOCK_NB) == 0) {
                unlink(sock.c_str()); // a stale file from a server that is gone
                remove_stale_starting_names(sock);
                role = MemifRole::kServer;
            } else {
                close(o->lock_fd);
                o->lock_fd = -1;
                if (role == MemifRole::kServer)
                    return fail(IBEX_ERR_ADDRESS_IN_USE, "%s: another process serves %s (it holds %s.lock)", device.c_str(),
                                sock.c_str(), sock.c_str());
                role = MemifRole::kClient;
            }
        }
        if (role == MemifRole::kClient) {
            // The server may still be creating its socket.
            struct stat st;
            for (int i = 0; i < 5000 && !(stat(sock.c_str(), &st) == 0 && S_ISSOCK(st.st_mode)); ++i) usleep(1000);
        }
        o->memif_server = role == MemifRole::kServer;
        o->memif_socket = sock;
        std::string listen_on = sock;
        if (o->memif_server) {
            o->server_socket = sock;
            // DPDK 22.11's server listens from its probe on but answers only once started,
            // and refuses for good a client that connects in between ("ID not found"). So
            // it listens under a name of its own, which open_dpdk_port_object renames to
            // the socket's once the device has started: a client, which waits for the file,
            // then always finds a server that answers.
            const std::string hidden = memif_starting_name(sock, seq);
            if (hidden.size() < sizeof(sockaddr_un{}.sun_path)) {
                unlink(hidden.c_str());
                o->server_bind_path = listen_on = hidden;
            }
        }
        const int64_t rsize = config::get_int("IBEX_DPDK_MEMIF_RSIZE", 11, 8, 14);
        o->rx_slots = 1u << rsize;
        name = "net_memif_ibex" + std::to_string(getpid()) + "_" + std::to_string(seq);
        args = std::string("role=") + (o->memif_server ? "server" : "client") + ",socket=" + listen_on +
               ",socket-abstract=no,bsize=" + std::to_string(config::get_int("IBEX_DPDK_MEMIF_BSIZE", 4608, 1024, 65535)) +
               ",rsize=" + std::to_string(rsize);
        break;
    }
    case Target::kAfPacket:
        name = "net_af_packet_ibex" + std::to_string(seq);
        o->netdev_mtu = netdev_mtu(spec.name);
        if (!o->netdev_mtu) return fail(IBEX_ERR_NO_DEVICE, "%s: no network interface %s here", device.c_str(), spec.name.c_str());
        // Ring frames that hold the netdev's MTU (the default 2 KiB drops RoCE at 4 KiB), in
        // blocks of at least a page: the kernel refuses PACKET_RX_RING (EINVAL) for a block
        // smaller than a page, which a 2 KiB frame at MTU 1500 used to be.
        {
            const uint32_t frame = af_packet_frame(o->netdev_mtu);
            const long page = sysconf(_SC_PAGESIZE);
            const uint32_t block = std::max<uint32_t>(frame, page > 0 ? static_cast<uint32_t>(page) : 4096u);
            args = "iface=" + spec.name + ",qpairs=1,blocksz=" + std::to_string(block) +
                   ",framesz=" + std::to_string(frame) + ",framecnt=1024";
            // The PMD bypasses the interface's qdisc by default (faster); traffic control
            // on the interface (a shaper, priority queues) then never sees the port's frames.
            if (config::get_bool("IBEX_AF_PACKET_QDISC", false)) args += ",qdisc_bypass=0";
        }
        break;
    case Target::kAfXdp:
        name = "net_af_xdp_ibex" + std::to_string(seq);
        args = "iface=" + spec.name + ",start_queue=0,queue_count=1";
        if (const std::string prog = xdp_program(); !prog.empty()) {
            args += ",xdp_prog=" + prog;
            o->kernel_arp = true;
            IBEX_LOG(info, "%s: XDP program %s: RoCEv2 to the port, the rest to the kernel", device.c_str(), prog.c_str());
        } else {
            IBEX_LOG(warn, "%s: the af_xdp PMD's own XDP program takes every frame of the queue: the kernel's TCP on %s "
                     "stops while the port is open (set IBEX_DPDK_XDP_PROG to a RoCE-only program)",
                     device.c_str(), spec.name.c_str());
        }
        o->netdev_mtu = netdev_mtu(spec.name);
        if (!o->netdev_mtu) return fail(IBEX_ERR_NO_DEVICE, "%s: no network interface %s here", device.c_str(), spec.name.c_str());
        break;
    case Target::kVdev:
        name = spec.name;
        break;
    case Target::kPci:
        name = spec.name;
        break;
    case Target::kPort:
        o->port_id = static_cast<uint16_t>(std::stoul(spec.name));
        if (!rte_eth_dev_is_valid_port(o->port_id))
            return fail(IBEX_ERR_NO_DEVICE, "%s: ethdev port %u does not exist (%u ports)", device.c_str(), o->port_id,
                        rte_eth_dev_count_avail());
        return IBEX_OK;
    }
    if (!spec.pmd_args.empty()) args += (args.empty() ? "" : ",") + spec.pmd_args;
    if (spec.target == Target::kPci) {
        const std::string devargs = args.empty() ? name : name + "," + args;
        if (rte_eth_dev_get_port_by_name(name.c_str(), &o->port_id) == 0) return IBEX_OK;
        if (rte_dev_probe(devargs.c_str()) != 0)
            return fail(IBEX_ERR_NO_DEVICE, "%s: cannot probe PCI device %s: %s (is it bound to vfio-pci?)", device.c_str(),
                        name.c_str(), rte_strerror(rte_errno));
    } else {
        if (rte_vdev_init(name.c_str(), args.c_str()) != 0)
            return fail(IBEX_ERR_NO_DEVICE, "%s: cannot create DPDK device %s,%s: %s", device.c_str(), name.c_str(),
                        args.c_str(), rte_strerror(rte_errno));
        o->vdev_name = name;
    }
    if (rte_eth_dev_get_port_by_name(name.c_str(), &o->port_id) != 0) {
        if (!o->vdev_name.empty()) rte_vdev_uninit(name.c_str());
        return fail(IBEX_ERR_NO_DEVICE, "%s: %s is not an ethdev", device.c_str(), name.c_str());
    }
    return IBEX_OK;
}

} // namespace ibex::soft::dpdk
