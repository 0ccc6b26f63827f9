// Path types between devices, read off the hwloc tree the way nvidia-smi and NCCL name
// them (REFERENCE.md section 6).
#include "runtime/topology/model.h"

#include <vector>

namespace ibex::topo {
namespace {

// Written here because hwloc_get_common_ancestor_obj() walks by depth, which I/O objects
// do not have (their depths are negative special values).
hwloc_obj_t common_ancestor(hwloc_obj_t a, hwloc_obj_t b) {
    std::vector<hwloc_obj_t> up;
    for (hwloc_obj_t o = a; o; o = o->parent) up.push_back(o);
    for (hwloc_obj_t o = b; o; o = o->parent)
        for (hwloc_obj_t x : up)
            if (x == o) return o;
    return nullptr;
}

// Bridges strictly between obj and its ancestor. Under one PCIe switch each device has
// just its downstream port below the switch's upstream port.
int bridges_between(hwloc_obj_t obj, hwloc_obj_t ancestor) {
    int n = 0;
    for (hwloc_obj_t o = obj->parent; o && o != ancestor; o = o->parent)
        if (o->type == HWLOC_OBJ_BRIDGE) ++n;
    return n;
}

bool is_host_bridge(hwloc_obj_t o) {
    return o->type == HWLOC_OBJ_BRIDGE && o->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_HOST;
}

ibex_path_type_t device_to_node(const Device &dev, const Device &node) {
    bool local = dev.locality_known && hwloc_bitmap_isset(dev.nodeset.get(), static_cast<unsigned>(node.numa_node));
    return local ? IBEX_PATH_PHB : IBEX_PATH_SYS;
}

} // namespace

ibex_path_type_t path_type(const ibex_topology &, const Device &a, const Device &b) {
    if (&a == &b) return IBEX_PATH_X;
    bool a_node = a.kind == IBEX_TOPO_NUMA, b_node = b.kind == IBEX_TOPO_NUMA;
    if (a_node && b_node) return IBEX_PATH_SYS;
    if (a_node) return device_to_node(b, a);
    if (b_node) return device_to_node(a, b);

    hwloc_obj_t c = common_ancestor(a.obj, b.obj);
    if (c && c->type == HWLOC_OBJ_BRIDGE) {
        if (is_host_bridge(c)) return IBEX_PATH_PHB;
        bool one_switch = bridges_between(a.obj, c) <= 1 && bridges_between(b.obj, c) <= 1;
        return one_switch ? IBEX_PATH_PIX : IBEX_PATH_PXB;
    }
    // Different host bridges: same node if both localities are known and shared. An
    // unknown locality (sysfs numa_node -1) can be anywhere, so it counts as SYS.
    bool same_node = a.locality_known && b.locality_known && hwloc_bitmap_intersects(a.nodeset.get(), b.nodeset.get());
    return same_node ? IBEX_PATH_NODE : IBEX_PATH_SYS;
}

} // namespace ibex::topo
