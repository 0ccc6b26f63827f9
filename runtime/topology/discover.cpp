// Discovery: hwloc reads the machine (or an XML file), and this file decides which of its
// PCI functions are GPUs and NICs, names them, and records where they sit.
#include "runtime/base/log.h"
#include "runtime/base/status.h"
#include "runtime/topology/model.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <mutex>
#include <tuple>
#include <unistd.h>

namespace ibex::topo {
namespace {

constexpr unsigned kVendorNvidia = 0x10de;
constexpr unsigned kVendorAmd = 0x1002;
// ibex's own info key: hwloc keeps only the link bandwidth, so the lane count is read from
// sysfs on this machine and carried in exported XML under this name.
constexpr const char *kLinkWidthInfo = "PCILinkWidth";

const char *info(hwloc_obj_t obj, const char *name) {
    const char *v = hwloc_obj_get_info_by_name(obj, name);
    return v ? v : "";
}

std::string busid_of(hwloc_obj_t pci) {
    char buf[32];
    const auto &a = pci->attr->pcidev;
    std::snprintf(buf, sizeof buf, "%04x:%02x:%02x.%01x", a.domain, a.bus, a.dev, a.func);
    return buf;
}

auto bus_order(hwloc_obj_t pci) {
    const auto &a = pci->attr->pcidev;
    return std::make_tuple(a.domain, a.bus, a.dev, a.func);
}

struct OsDevs {
    std::vector<hwloc_obj_t> coproc, gpu, net, rdma;
};

OsDevs os_devices(hwloc_obj_t pci) {
    OsDevs out;
    for (hwloc_obj_t c = pci->io_first_child; c; c = c->next_sibling) {
        if (c->type != HWLOC_OBJ_OS_DEVICE) continue;
        switch (c->attr->osdev.type) {
        case HWLOC_OBJ_OSDEV_COPROC: out.coproc.push_back(c); break;
        case HWLOC_OBJ_OSDEV_GPU: out.gpu.push_back(c); break;
        case HWLOC_OBJ_OSDEV_NETWORK: out.net.push_back(c); break;
        case HWLOC_OBJ_OSDEV_OPENFABRICS: out.rdma.push_back(c); break;
        default: break;
        }
    }
    return out;
}

// A compute API names the function: a CUDA, OpenCL or Level Zero co-processor, or an NVML
// or RSMI GPU device. DRM nodes (card0, renderD128, controlD64) do not count: every display
// function has them.
bool has_compute_osdev(const OsDevs &os) {
    if (!os.coproc.empty()) return true;
    for (hwloc_obj_t g : os.gpu) {
        const char *sub = g->subtype ? g->subtype : "";
        if (std::strcmp(sub, "NVML") == 0 || std::strcmp(sub, "RSMI") == 0 || std::strncmp(g->name, "nvml", 4) == 0 ||
            std::strncmp(g->name, "rsmi", 4) == 0)
            return true;
    }
    return false;
}

// A display or accelerator function is a GPU only when it can compute: a compute OS device
// names it, or it is an NVIDIA or AMD 3D controller (class 0302: a data-centre GPU whose
// driver is not loaded where the topology was taken). A VGA-class function without one is
// the server's onboard graphics (ASPEED, Matrox, or AMD's own ATI ES1000 BMC chip), and
// must not get a rank.
bool is_gpu(hwloc_obj_t pci, const OsDevs &os) {
    const unsigned cls = pci->attr->pcidev.class_id;
    const unsigned vendor = pci->attr->pcidev.vendor_id;
    const bool display_or_accel = (cls >> 8) == 0x03 || (cls >> 8) == 0x12;
    if (!display_or_accel) return false;
    return has_compute_osdev(os) || (cls == 0x0302 && (vendor == kVendorNvidia || vendor == kVendorAmd));
}

// Network (0x02xx) or InfiniBand (0x0c06) function, usable only through a netdev or an
// RDMA device: a function whose driver is not bound has neither.
bool is_nic(hwloc_obj_t pci, const OsDevs &os) {
    unsigned cls = pci->attr->pcidev.class_id;
    return ((cls >> 8) == 0x02 || cls == 0x0c06) && (!os.net.empty() || !os.rdma.empty());
}

// DRM nodes (card0, renderD128) exist for every display function; compute APIs name GPUs
// the way users know them.
std::string gpu_os_name(const OsDevs &os) {
    if (!os.coproc.empty()) return os.coproc.front()->name;
    for (hwloc_obj_t g : os.gpu) {
        std::string n = g->name ? g->name : "";
        if (n.rfind("card", 0) != 0 && n.rfind("render", 0) != 0) return n;
    }
    return {};
}

void set_locality(hwloc_topology_t hw, Device &d) {
    hwloc_obj_t anc = hwloc_get_non_io_ancestor_obj(hw, d.obj);
    hwloc_obj_t root = hwloc_get_root_obj(hw);
    d.cpuset = bitmap_dup(anc->cpuset);
    d.nodeset = bitmap_dup(anc->nodeset);
    // hwloc hangs a device whose sysfs numa_node is -1 (local_cpus = every CPU) off the
    // Machine: on a multi-node host that means "unknown", not node 0.
    int nodes = hwloc_get_nbobjs_by_type(hw, HWLOC_OBJ_NUMANODE);
    d.locality_known = nodes <= 1 || !hwloc_bitmap_isequal(anc->nodeset, root->nodeset);
    d.cpus_list = bitmap_list(d.cpuset.get());
    d.nodes_list = d.locality_known ? bitmap_list(d.nodeset.get()) : "N/A";
    d.numa_node = (d.locality_known && hwloc_bitmap_weight(d.nodeset.get()) == 1)
                      ? hwloc_bitmap_first(d.nodeset.get())
                      : -1;
}

void set_link(Device &d) {
    d.link_speed = d.obj->attr->pcidev.linkspeed;
    d.link_width = std::atoi(info(d.obj, kLinkWidthInfo));
}

// Lane counts of this machine's functions, from sysfs, into the hwloc objects.
void annotate_link_widths(hwloc_topology_t hw) {
    for (hwloc_obj_t pci = nullptr; (pci = hwloc_get_next_pcidev(hw, pci));) {
        if (hwloc_obj_get_info_by_name(pci, kLinkWidthInfo)) continue;
        std::ifstream f("/sys/bus/pci/devices/" + busid_of(pci) + "/current_link_width");
        int width = 0;
        if (f >> width && width > 0) hwloc_obj_add_info(pci, kLinkWidthInfo, std::to_string(width).c_str());
    }
}

Device make_gpu(hwloc_topology_t hw, hwloc_obj_t pci, const OsDevs &os) {
    Device d;
    d.kind = IBEX_TOPO_GPU;
    d.obj = pci;
    d.busid = busid_of(pci);
    d.name = gpu_os_name(os);
    if (d.name.empty()) d.name = d.busid;
    for (hwloc_obj_t o : os.coproc) d.os_names += std::string(o->name) + ",";
    for (hwloc_obj_t o : os.gpu) d.os_names += std::string(o->name) + ",";
    for (hwloc_obj_t o : os.coproc)
        if (*info(o, "GPUModel")) d.model = info(o, "GPUModel");
    for (hwloc_obj_t o : os.gpu)
        if (d.model.empty() && *info(o, "GPUModel")) d.model = info(o, "GPUModel");
    if (d.model.empty()) d.model = info(pci, "PCIDevice");
    set_locality(hw, d);
    set_link(d);
    return d;
}

Device make_nic(hwloc_topology_t hw, hwloc_obj_t pci, const OsDevs &os) {
    Device d;
    d.kind = IBEX_TOPO_NIC;
    d.obj = pci;
    d.busid = busid_of(pci);
    if (!os.rdma.empty()) d.rdma = os.rdma.front()->name;
    if (!os.net.empty()) d.netdev = os.net.front()->name;
    d.name = !d.rdma.empty() ? d.rdma : d.netdev;
    d.model = info(pci, "PCIDevice");
    set_locality(hw, d);
    set_link(d);
    return d;
}

Device make_numa(hwloc_obj_t node) {
    Device d;
    d.kind = IBEX_TOPO_NUMA;
    d.obj = node;
    d.numa_node = static_cast<int>(node->os_index);
    d.name = d.label = "NUMA" + std::to_string(node->os_index);
    d.cpuset = bitmap_dup(node->cpuset);
    d.nodeset = bitmap_dup(node->nodeset);
    d.locality_known = true;
    d.cpus_list = bitmap_list(d.cpuset.get());
    d.nodes_list = std::to_string(node->os_index);
    return d;
}

ibex_status_t open_hwloc(const std::string &xml_path, HwlocTopology &out) {
    // One live discovery at a time in a process: hwloc's Linux backend goes through
    // libudev, which seeds a global key without a lock (ThreadSanitizer saw two thread
    // ranks' getrandom write one libudev global while opening their devices at once).
    static std::mutex live_discovery;
    std::unique_lock serialize(live_discovery, std::defer_lock);
    if (xml_path.empty()) serialize.lock();
    hwloc_topology_t raw = nullptr;
    if (hwloc_topology_init(&raw) != 0) return fail_errno(IBEX_ERR_NO_MEMORY, errno, "hwloc_topology_init");
    HwlocTopology hw(raw);
    // hwloc 2.x drops every PCI and OS device by default; keep GPUs, NICs, the bridges
    // above them and their OS devices.
    if (hwloc_topology_set_io_types_filter(raw, HWLOC_TYPE_FILTER_KEEP_IMPORTANT) != 0)
        return fail_errno(IBEX_ERR_INTERNAL, errno, "hwloc_topology_set_io_types_filter");
    if (!xml_path.empty()) {
        // hwloc's own complaint about a missing file is a bare EINVAL; say what is wrong.
        if (access(xml_path.c_str(), R_OK) != 0)
            return fail_errno(IBEX_ERR_NO_DEVICE, errno, "topology file %s cannot be read", xml_path.c_str());
        if (hwloc_topology_set_xml(raw, xml_path.c_str()) != 0)
            return fail_errno(IBEX_ERR_INVALID_ARGUMENT, errno,
                              "topology file %s is not a valid hwloc XML topology", xml_path.c_str());
    }
    if (hwloc_topology_load(raw) != 0) {
        if (!xml_path.empty())
            return fail_errno(IBEX_ERR_INVALID_ARGUMENT, errno,
                              "topology file %s is not a valid hwloc XML topology", xml_path.c_str());
        return fail_errno(IBEX_ERR_SYSTEM, errno, "hwloc could not discover this machine");
    }
    out = std::move(hw);
    return IBEX_OK;
}

} // namespace

ibex_status_t load(const std::string &xml_path, std::unique_ptr<ibex_topology> &out) {
    auto topo = std::make_unique<ibex_topology>();
    IBEX_TRY(open_hwloc(xml_path, topo->hw));
    hwloc_topology_t hw = topo->hw.get();
    if (xml_path.empty()) annotate_link_widths(hw);
    topo->source = xml_path;
    topo->hostname = info(hwloc_get_root_obj(hw), "HostName");

    std::vector<hwloc_obj_t> gpus, nics;
    for (hwloc_obj_t pci = nullptr; (pci = hwloc_get_next_pcidev(hw, pci));) {
        OsDevs os = os_devices(pci);
        if (is_gpu(pci, os)) gpus.push_back(pci);
        else if (is_nic(pci, os)) nics.push_back(pci);
    }
    auto by_bus = [](hwloc_obj_t a, hwloc_obj_t b) { return bus_order(a) < bus_order(b); };
    std::sort(gpus.begin(), gpus.end(), by_bus);
    std::sort(nics.begin(), nics.end(), by_bus);

    std::vector<hwloc_obj_t> nodes;
    for (hwloc_obj_t n = nullptr; (n = hwloc_get_next_obj_by_type(hw, HWLOC_OBJ_NUMANODE, n));) nodes.push_back(n);
    std::sort(nodes.begin(), nodes.end(), [](hwloc_obj_t a, hwloc_obj_t b) { return a->os_index < b->os_index; });

    auto add = [&](Device d, const char *prefix) {
        d.ordinal = topo->count[d.kind]++;
        if (prefix) d.label = prefix + std::to_string(d.ordinal);
        topo->devices.push_back(std::move(d));
    };
    topo->first[IBEX_TOPO_GPU] = 0;
    for (hwloc_obj_t g : gpus) add(make_gpu(hw, g, os_devices(g)), "GPU");
    topo->first[IBEX_TOPO_NIC] = static_cast<int>(topo->devices.size());
    for (hwloc_obj_t n : nics) add(make_nic(hw, n, os_devices(n)), "NIC");
    topo->first[IBEX_TOPO_NUMA] = static_cast<int>(topo->devices.size());
    for (hwloc_obj_t n : nodes) add(make_numa(n), nullptr);

    IBEX_LOG(info, "topology %s: %d GPUs, %d NICs, %d NUMA nodes",
             xml_path.empty() ? "of this machine" : xml_path.c_str(), topo->count[IBEX_TOPO_GPU],
             topo->count[IBEX_TOPO_NIC], topo->count[IBEX_TOPO_NUMA]);
    out = std::move(topo);
    return IBEX_OK;
}

int find_device(const ibex_topology &topo, const std::string &name) {
    if (name.empty()) return -1;
    for (size_t i = 0; i < topo.devices.size(); ++i) {
        const Device &d = topo.devices[i];
        if (name == d.label || name == d.name || name == d.rdma || name == d.netdev || name == d.busid)
            return static_cast<int>(i);
        // any OS name of a GPU ("nvml0" as well as "cuda0"); os_names ends with ','
        if (d.os_names.find(name + ",") == 0 || d.os_names.find("," + name + ",") != std::string::npos)
            return static_cast<int>(i);
    }
    return -1;
}

} // namespace ibex::topo
