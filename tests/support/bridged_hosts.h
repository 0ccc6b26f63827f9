// Test helper: "hosts" as network namespaces, each with one veth whose other end sits on a
// bridge in the root namespace. The bridge has an address as well, so a socket opened in
// the root namespace (a rendezvous) is reachable from every host. Needs root and iproute2;
// create() says why when it cannot. Names carry the process id, so parallel tests do not
// collide, and the destructor removes everything.
#pragma once

#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

namespace ibex::test {

// Moves the calling thread (a forked, single-threaded child: the whole process) into a
// named network namespace.
inline bool enter_netns(const std::string &name) {
    const int fd = ::open(("/run/netns/" + name).c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    const bool ok = setns(fd, CLONE_NEWNET) == 0;
    ::close(fd);
    return ok;
}

class BridgedHosts {
public:
    BridgedHosts() = default;
    BridgedHosts(const BridgedHosts &) = delete;
    BridgedHosts &operator=(const BridgedHosts &) = delete;
    ~BridgedHosts() {
        // The root-side ends first: removing a namespace frees its veth only later, in the
        // kernel's own time, and the next instance must not meet the old pair.
        for (const std::string &o : outer_) sh("ip link del " + o);
        for (const std::string &ns : ns_) sh("ip netns del " + ns);
        if (!bridge_.empty()) sh("ip link del " + bridge_);
    }

    // mtu: the netdev MTU of the bridge and every veth (0: the kernel's default, 1500).
    bool create(int hosts, std::string *why, int mtu = 0) {
        if (geteuid() != 0) return no(why, "needs root: creates network namespaces, veth pairs and a bridge");
        if (!sh("command -v ip")) return no(why, "needs iproute2 (ip)");
        static int instances = 0; // names unique per instance too, not only per process
        const std::string id = std::to_string(getpid() % 100000) + "_" + std::to_string(instances++ % 100);
        const std::string net = "10.78." + std::to_string(getpid() % 200 + 20) + ".";
        bridge_ = "ibr" + id;
        bridge_ip_ = net + "254";
        for (const std::string &c : {"ip link add " + bridge_ + " type bridge", "ip addr add " + bridge_ip_ + "/24 dev " + bridge_,
                                     "ip link set " + bridge_ + " up"})
            if (!sh(c)) return no(why, "failed: " + c);
        for (int h = 0; h < hosts; ++h) {
            const std::string hs = std::to_string(h), ns = "ibexh" + id + "_" + hs;
            const std::string inner = "vh" + id + "_" + hs, outer = "vb" + id + "_" + hs, ip = net + std::to_string(h + 1);
            ns_.push_back(ns);
            outer_.push_back(outer);
            if_.push_back(inner);
            ip_.push_back(ip);
            for (const std::string &c :
                 {"ip netns add " + ns, "ip link add " + outer + " type veth peer name " + inner,
                  "ip link set " + inner + " netns " + ns, "ip link set " + outer + " master " + bridge_,
                  "ip link set " + outer + " up", "ip -n " + ns + " addr add " + ip + "/24 dev " + inner,
                  "ip -n " + ns + " link set " + inner + " up", "ip -n " + ns + " link set lo up"})
                if (!sh(c)) return no(why, "failed: " + c);
        }
        if (mtu) {
            const std::string m = " mtu " + std::to_string(mtu);
            std::vector<std::string> cmds;
            for (int h = 0; h < hosts; ++h) {
                cmds.push_back("ip link set " + outer_[size_t(h)] + m);
                cmds.push_back("ip -n " + ns_[size_t(h)] + " link set " + if_[size_t(h)] + m);
            }
            cmds.push_back("ip link set " + bridge_ + m); // after its ports: a bridge takes its ports' least MTU
            for (const std::string &c : cmds)
                if (!sh(c)) return no(why, "failed: " + c);
        }
        return true;
    }

    // One more NIC for host h: a veth named `name` inside ns(h) (names are per namespace,
    // so every host may have the same ones, as machines of one model do), on the same
    // bridge, with its own address. Call after create().
    bool add_nic(int h, const std::string &name, std::string *why) {
        const std::string k = std::to_string(extra_++), id = bridge_.substr(3);
        const std::string tmp = "vt" + id + "_" + k, outer = "vx" + id + "_" + k, ns = ns_[static_cast<size_t>(h)];
        const std::string ip = bridge_ip_.substr(0, bridge_ip_.rfind('.') + 1) + std::to_string(100 + extra_);
        outer_.push_back(outer);
        for (const std::string &c : {"ip link add " + outer + " type veth peer name " + tmp, "ip link set " + tmp + " netns " + ns,
                                     "ip -n " + ns + " link set " + tmp + " name " + name,
                                     "ip link set " + outer + " master " + bridge_, "ip link set " + outer + " up",
                                     "ip -n " + ns + " addr add " + ip + "/24 dev " + name,
                                     "ip -n " + ns + " link set " + name + " up"})
            if (!sh(c)) return no(why, "failed: " + c);
        return true;
    }

    int hosts() const { return static_cast<int>(ns_.size()); }
    const std::string &ns(int h) const { return ns_[static_cast<size_t>(h)]; }
    const std::string &ifname(int h) const { return if_[static_cast<size_t>(h)]; } // inside ns(h)
    const std::string &ip(int h) const { return ip_[static_cast<size_t>(h)]; }
    const std::string &bridge_ip() const { return bridge_ip_; }

private:
    static bool sh(const std::string &cmd) { return std::system((cmd + " >/dev/null 2>&1").c_str()) == 0; }
    static bool no(std::string *why, const std::string &text) {
        *why = text;
        return false;
    }

    std::string bridge_, bridge_ip_;
    std::vector<std::string> ns_, if_, ip_, outer_;
    int extra_ = 0;
};

} // namespace ibex::test
