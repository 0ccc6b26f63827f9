// RAII ownership of hwloc handles and the cpulist formatting every topology file uses.
#pragma once

#include <hwloc.h>

#include <cstdlib>
#include <memory>
#include <string>

namespace ibex::topo {

struct HwlocTopologyDeleter {
    void operator()(hwloc_topology *t) const { hwloc_topology_destroy(t); }
};
using HwlocTopology = std::unique_ptr<hwloc_topology, HwlocTopologyDeleter>;

struct BitmapDeleter {
    void operator()(hwloc_bitmap_s *b) const { hwloc_bitmap_free(b); }
};
using Bitmap = std::unique_ptr<hwloc_bitmap_s, BitmapDeleter>;

inline Bitmap bitmap_new() { return Bitmap(hwloc_bitmap_alloc()); }
inline Bitmap bitmap_dup(hwloc_const_bitmap_t b) { return Bitmap(hwloc_bitmap_dup(b)); }

// "0-7,16-23": the format of sysfs local_cpulist and of taskset -c.
inline std::string bitmap_list(hwloc_const_bitmap_t b) {
    char *s = nullptr;
    if (hwloc_bitmap_list_asprintf(&s, b) < 0 || !s) return {};
    std::string out(s);
    std::free(s);
    return out;
}

} // namespace ibex::topo
