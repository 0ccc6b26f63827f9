// Which ibex devices the plugin offers NCCL, what it says about them, and their contexts.
#include <algorithm>
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits.h>
#include <string>
#include <vector>

#include "plugins/nccl-net/state.h"

namespace ibex_nccl {
namespace {

struct Device {
    std::string name;     // ibex device name: "udp:eth0", "mlx5_0", "shm"
    std::string provider; // "soft", "verbs", "shm"
    std::string pci_path; // sysfs path of the NIC, empty when there is none
    int speed_mbps = 10000;
    ibex_context_t *context = nullptr;
    ibex_pd_t *pd = nullptr;
};

std::vector<Device> g_devices;
bool g_initialised = false;

int read_int_file(const std::string &path, int fallback) {
    std::ifstream f(path);
    int v = 0;
    return (f >> v) && v > 0 ? v : fallback;
}

void describe(Device &d) {
    std::string sysfs;
    if (d.provider == "shm") {
        d.speed_mbps = 100000;
        return;
    }
    if (d.name.rfind("udp:", 0) == 0 || d.name.rfind("dpdk:", 0) == 0) {
        const std::string ifname = d.name.substr(d.name.find(':') + 1);
        sysfs = "/sys/class/net/" + ifname;
        d.speed_mbps = read_int_file(sysfs + "/speed", 10000);
    } else {
        sysfs = "/sys/class/infiniband/" + d.name;
        // "100 Gb/sec (4X EDR)"
        d.speed_mbps = read_int_file(sysfs + "/ports/1/rate", 100) * 1000;
    }
    char real[PATH_MAX];
    if (realpath((sysfs + "/device").c_str(), real) != nullptr)
        d.pci_path = real;
}

// IBEX_NCCL_DEVICES="udp:eth0,mlx5_0" picks; by default every device except the
// loopback and intra-host ones, which NCCL would otherwise prefer for nothing.
std::vector<Device> choose_devices() {
    ibex_device_list_t *list = nullptr;
    int count = 0;
    std::vector<Device> all;
    if (ibex_get_device_list(&list, &count) != IBEX_OK) {
        IBEX_NCCL_WARN("NET/IBEX : ibex_get_device_list failed: %s", ibex_last_error());
        return all;
    }
    for (int i = 0; i < count; ++i)
        all.push_back({ibex_device_name(list, i), ibex_device_provider(list, i)});
    ibex_free_device_list(list);

    std::vector<Device> chosen;
    if (const char *want = std::getenv("IBEX_NCCL_DEVICES"); want != nullptr && *want != '\0') {
        std::string rest = want;
        while (!rest.empty()) {
            const size_t comma = rest.find(',');
            const std::string name = rest.substr(0, comma);
            rest = comma == std::string::npos ? "" : rest.substr(comma + 1);
            auto it = std::find_if(all.begin(), all.end(),
                                   [&](const Device &d) { return d.name == name; });
            if (it == all.end())
                IBEX_NCCL_WARN("NET/IBEX : IBEX_NCCL_DEVICES names %s, which ibex does not list",
                               name.c_str());
            else
                chosen.push_back(*it);
        }
        return chosen;
    }
    for (const Device &d : all)
        if (d.name != "udp:lo" && d.provider != "shm")
            chosen.push_back(d);
    return chosen.empty() ? all : chosen;
}

uint64_t name_hash(const std::string &s) {
    uint64_t h = 1469598103934665603ull; // FNV-1a: a stable id per device name
    for (unsigned char c : s)
        h = (h ^ c) * 1099511628211ull;
    return h;
}

} // namespace

Plugin &plugin() {
    static Plugin p;
    return p;
}

void log(ncclDebugLogLevel level, const char *file, int line, const char *fmt, ...) {
    char text[512];
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    ncclDebugLogger_t logger = plugin().logger;
    if (logger != nullptr)
        logger(level, NCCL_INIT | NCCL_NET, file, line, "%s", text);
    else if (level == NCCL_LOG_WARN)
        std::fprintf(stderr, "%s\n", text);
}

ncclResult_t init(ncclDebugLogger_t logger) {
    std::lock_guard<std::mutex> lock(plugin().mu);
    plugin().logger = logger;
    if (!g_initialised) {
        g_devices = choose_devices();
        for (Device &d : g_devices)
            describe(d);
        g_initialised = true;
    }
    std::string names;
    for (const Device &d : g_devices)
        names += (names.empty() ? "" : " ") + d.name;
    IBEX_NCCL_INFO("NET/IBEX : ibex %s, %zu device(s): %s", ibex_version_string(),
                   g_devices.size(), names.c_str());
    return g_devices.empty() ? ncclSystemError : ncclSuccess;
}

ncclResult_t devices(int *ndev) {
    if (ndev == nullptr)
        return ncclInvalidArgument;
    *ndev = static_cast<int>(g_devices.size());
    return ncclSuccess;
}

ncclResult_t properties(int dev, ncclNetProperties_v9_t *props) {
    if (props == nullptr || dev < 0 || dev >= static_cast<int>(g_devices.size())) {
        IBEX_NCCL_WARN("NET/IBEX : getProperties: no device %d", dev);
        return ncclInvalidArgument;
    }
    Device &d = g_devices[static_cast<size_t>(dev)];
    std::memset(props, 0, sizeof(*props));
    props->name = const_cast<char *>(d.name.c_str());
    props->pciPath = d.pci_path.empty() ? nullptr : const_cast<char *>(d.pci_path.c_str());
    props->guid = name_hash(d.name);
    // CUDA buffers: ibex registers them itself (dma-buf on verbs, staged on soft).
    props->ptrSupport = NCCL_PTR_HOST | (ibex_cuda_available() ? NCCL_PTR_CUDA : 0);
    props->regIsGlobal = 0;
    props->forceFlush = 0;
    props->speed = d.speed_mbps;
    props->port = 1;
    props->latency = 0.0f;
    props->maxComms = 1024;
    props->maxRecvs = kMaxRecvs;
    props->netDeviceType = NCCL_NET_DEVICE_HOST;
    props->netDeviceVersion = 0;
    props->vProps.ndevs = 1;
    props->vProps.devs[0] = dev;
    props->maxP2pBytes = size_t{1} << 30; // one RDMA WRITE (32-bit length) per isend
    props->maxCollBytes = size_t{1} << 30;
    return ncclSuccess;
}

ncclResult_t make_vdevice(int * /*d*/, ncclNetVDeviceProps_v9_t * /*props*/) {
    IBEX_NCCL_WARN("NET/IBEX : virtual NICs (NCCL_NET_MERGE_LEVEL) are not supported by ibex");
    return ncclInvalidUsage;
}

ibex_pd_t *device_pd(int dev, ibex_context_t **context) {
    if (dev < 0 || dev >= static_cast<int>(g_devices.size())) {
        IBEX_NCCL_WARN("NET/IBEX : no device %d (%zu devices)", dev, g_devices.size());
        return nullptr;
    }
    Device &d = g_devices[static_cast<size_t>(dev)];
    if (d.pd == nullptr) {
        if (ibex_open_device(d.name.c_str(), nullptr, &d.context) != IBEX_OK) {
            IBEX_NCCL_WARN("NET/IBEX : opening %s failed: %s", d.name.c_str(), ibex_last_error());
            return nullptr;
        }
        if (ibex_alloc_pd(d.context, &d.pd) != IBEX_OK) {
            IBEX_NCCL_WARN("NET/IBEX : a PD on %s: %s", d.name.c_str(), ibex_last_error());
            (void)ibex_close_device(d.context);
            d.context = nullptr;
            return nullptr;
        }
    }
    if (context != nullptr)
        *context = d.context;
    return d.pd;
}

uint32_t device_socket_addr(int dev) {
    in_addr fixed{};
    if (const char *env = std::getenv("IBEX_NCCL_SOCKET_ADDR");
        env != nullptr && inet_pton(AF_INET, env, &fixed) == 1)
        return fixed.s_addr;
    std::string ifname;
    if (dev >= 0 && dev < static_cast<int>(g_devices.size())) {
        const Device &d = g_devices[static_cast<size_t>(dev)];
        if (d.name == "udp:lo" || d.provider == "shm")
            return htonl(INADDR_LOOPBACK);
        if (d.name.find(':') != std::string::npos)
            ifname = d.name.substr(d.name.find(':') + 1);
    }
    ifaddrs *ifs = nullptr;
    uint32_t found = htonl(INADDR_LOOPBACK);
    bool exact = false;
    if (getifaddrs(&ifs) == 0) {
        for (ifaddrs *i = ifs; i != nullptr && !exact; i = i->ifa_next) {
            if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET)
                continue;
            const uint32_t a = reinterpret_cast<sockaddr_in *>(i->ifa_addr)->sin_addr.s_addr;
            if (!ifname.empty() && ifname == i->ifa_name) {
                found = a;
                exact = true;
            } else if (found == htonl(INADDR_LOOPBACK) && (i->ifa_flags & IFF_LOOPBACK) == 0) {
                found = a;
            }
        }
        freeifaddrs(ifs);
    }
    return found;
}

} // namespace ibex_nccl
