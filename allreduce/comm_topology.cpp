#include "allreduce/comm_topology.h"

#include <cstdio>
#include <cstring>
#include <fstream>
#include <ifaddrs.h>
#include <net/if.h>
#include <sys/stat.h>
#include <unistd.h>

#include "allreduce/comm.h"
#include "runtime/base/config.h"
#include "runtime/base/log.h"
#include "runtime/base/status.h"

namespace ibex::coll {
namespace {


struct Announce {
    char host[120];
    uint32_t wants_shm;
    uint32_t reserved;
};

} // namespace

bool device_listed(const char *name) {
    ibex_device_list_t *list = nullptr;
    int count = 0;
    bool found = false;
    if (ibex_get_device_list(&list, &count) == IBEX_OK)
        for (int i = 0; i < count && !found; ++i) found = std::strcmp(ibex_device_name(list, i), name) == 0;
    if (list) ibex_free_device_list(list);
    return found;
}

bool device_is_local_only(const std::string &name) {
    if (name == kShmDevice) return true;
    if (name.rfind("udp:", 0) != 0) return false; // dpdk ports and RDMA devices leave the host
    const size_t end = name.find(':', 4);
    const std::string ifname = name.substr(4, end == std::string::npos ? std::string::npos : end - 4);
    ifaddrs *ifs = nullptr;
    bool loopback = false;
    if (getifaddrs(&ifs) != 0) return false;
    for (ifaddrs *i = ifs; i; i = i->ifa_next)
        if (i->ifa_name && ifname == i->ifa_name && (i->ifa_flags & IFF_LOOPBACK)) loopback = true;
    freeifaddrs(ifs);
    return loopback;
}

std::string first_listed_device(const std::function<bool(const std::string &)> &wanted) {
    ibex_device_list_t *list = nullptr;
    int count = 0;
    std::string pick;
    if (ibex_get_device_list(&list, &count) == IBEX_OK)
        for (int i = 0; i < count && pick.empty(); ++i)
            if (wanted(ibex_device_name(list, i))) pick = ibex_device_name(list, i);
    if (list) ibex_free_device_list(list);
    return pick;
}

std::string udp_device_for_local_rank(const std::string &udp_device, int local_rank) {
    return udp_device + ":" + std::to_string(4791 + local_rank);
}

ibex_status_t choose_device_for_hosts(ibex_comm *c) {
    // Hosts named by IBEX_HOST_ID may all be this machine: its loopback reaches them, and
    // their local ranks are not the ranks sharing an address.
    if (config::get_string("IBEX_HOST_ID", nullptr)) return IBEX_OK;
    const HostLayout &l = c->topo.layout;
    const int hosts = l.hosts();
    if (hosts > 1 && device_is_local_only(c->opt.device)) {
        if (!c->opt.device_defaulted)
            return fail(IBEX_ERR_INVALID_ARGUMENT,
                        "device %s reaches only this machine, and the communicator spans %d hosts: name a device "
                        "on the network between them (config->device or IBEX_DEVICE, e.g. udp:eth0)",
                        c->opt.device.c_str(), hosts);
        const std::string pick = first_listed_device([](const std::string &d) { return !device_is_local_only(d); });
        if (pick.empty())
            return fail(IBEX_ERR_NO_DEVICE,
                        "the communicator spans %d hosts, and this host lists no device beyond %s: set IBEX_DEVICE",
                        hosts, c->opt.device.c_str());
        IBEX_LOG(info, "communicator rank %d: %d hosts, so device %s rather than %s (the first listed)", c->rank,
                 hosts, pick.c_str(), c->opt.device.c_str());
        c->opt.device = pick;
    }
    // Ranks of one host on one soft udp device would all bind its address's UDP port 4791
    // (loopback alone gives each process an address of its own): each takes 4791 + its
    // local rank, as the rail devices do, unless the device names a port.
    const std::string &d = c->opt.device;
    const int local_size = static_cast<int>(l.members[static_cast<size_t>(l.host_of[static_cast<size_t>(c->rank)])].size());
    if (local_size > 1 && d.rfind("udp:", 0) == 0 && d.find(':', 4) == std::string::npos && !device_is_local_only(d))
        c->opt.device = udp_device_for_local_rank(d, l.local_rank(c->rank));
    return IBEX_OK;
}

std::string host_identity() {
    if (const char *id = config::get_string("IBEX_HOST_ID", nullptr); id && *id) return id;
    char name[256] = {};
    if (gethostname(name, sizeof name - 1) != 0) std::snprintf(name, sizeof name, "?");
    std::string boot;
    std::ifstream("/proc/sys/kernel/random/boot_id") >> boot;
    struct stat ns {};
    const unsigned long long netns = ::stat("/proc/self/ns/net", &ns) == 0 ? static_cast<unsigned long long>(ns.st_ino) : 0;
    char out[400];
    std::snprintf(out, sizeof out, "%s/%s/net:%llu", name, boot.c_str(), netns);
    return out;
}

ibex_status_t learn_topology(ibex_comm *c, Topology *out) {
    const int n = c->nranks;
    const std::string id = host_identity();
    Announce mine{};
    // Long names keep their tail: the boot id and namespace tell hosts apart.
    const size_t skip = id.size() >= sizeof mine.host ? id.size() - (sizeof mine.host - 1) : 0;
    std::snprintf(mine.host, sizeof mine.host, "%s", id.c_str() + skip);
    const bool own_is_shm = c->opt.device == kShmDevice;
    // GPU buffers reach no transport (allreduce/gpu_staging.h), so GPU hosts use shm too.
    // Where the communicator's own device is shm, its peers are this host's ranks over shm
    // all the same, and count as such: the executor then opens that one link for them (no
    // second context), and the paths made for shm peers (fast boxes, direct reads and
    // writes, staging) apply. Counting them as network peers left a one-host communicator
    // on device shm (ibex.torch's choice on one host) on the scheduled algorithms: an
    // 8 MiB allreduce of two ranks took 3.6 ms there against 1.7 ms.
    mine.wants_shm = config::get_bool("IBEX_SHM", true) && (own_is_shm || device_listed(kShmDevice));
    std::vector<Announce> all(static_cast<size_t>(n));
    IBEX_TRY(c->boot->allgather(&mine, sizeof mine, all.data(), c->opt.timeout_ms));
    std::vector<std::string> keys;
    for (Announce &a : all) {
        a.host[sizeof a.host - 1] = '\0';
        keys.emplace_back(a.host);
    }
    out->layout = make_host_layout(keys);
    out->local.assign(static_cast<size_t>(n), 0);
    out->shm = false;
    const int me = c->rank;
    for (int p = 0; p < n; ++p) {
        const bool same = p != me && keys[static_cast<size_t>(p)] == keys[static_cast<size_t>(me)];
        if (own_is_shm && !same && p != me)
            return fail(IBEX_ERR_INVALID_ARGUMENT,
                        "device shm reaches only the ranks of this host, and rank %d is on another (%s, this rank %s)",
                        p, keys[static_cast<size_t>(p)].c_str(), keys[static_cast<size_t>(me)].c_str());
        if (same && mine.wants_shm && all[static_cast<size_t>(p)].wants_shm) {
            out->local[static_cast<size_t>(p)] = 1;
            out->shm = true;
        }
    }
    out->irregular.clear();
    hierarchical_applies(out->layout, &out->irregular);
    IBEX_LOG(info, "communicator rank %d/%d: host %s, %s, shm %s", me, n, keys[static_cast<size_t>(me)].c_str(),
             out->layout.describe().c_str(), out->shm ? "to this host's ranks" : "unused");
    return IBEX_OK;
}

} // namespace ibex::coll
