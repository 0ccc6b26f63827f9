// The NIC binding policy: which NIC(s), NUMA node and progress cores a local rank gets.
#include "runtime/base/config.h"
#include "runtime/base/log.h"
#include "runtime/base/status.h"
#include "runtime/topology/model.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <sstream>

namespace ibex::topo {
namespace {

using Nics = std::vector<int>; // device indices

std::string nic_names(const ibex_topology &topo) {
    std::string s;
    for (int i = 0; i < topo.count[IBEX_TOPO_NIC]; ++i) {
        const Device &d = topo.of_kind(IBEX_TOPO_NIC, i);
        s += (s.empty() ? "" : ", ") + d.label + "=" + d.name;
    }
    return s.empty() ? "none" : s;
}

// RDMA-capable NICs when there are any (a plain netdev only serves the soft transport),
// narrowed to IBEX_NIC when set.
ibex_status_t candidates(const ibex_topology &topo, Nics &out, bool &from_env) {
    out.clear();
    from_env = false;
    const int first = topo.first[IBEX_TOPO_NIC], n = topo.count[IBEX_TOPO_NIC];
    if (const char *env = config::get_string("IBEX_NIC", nullptr)) {
        std::stringstream ss(env);
        for (std::string name; std::getline(ss, name, ',');) {
            if (name.empty()) continue;
            int idx = find_device(topo, name);
            if (idx < first || idx >= first + n)
                return fail(IBEX_ERR_INVALID_ARGUMENT, "IBEX_NIC=%s: \"%s\" is not a NIC of this host (NICs: %s)", env,
                            name.c_str(), nic_names(topo).c_str());
            if (std::find(out.begin(), out.end(), idx) == out.end()) out.push_back(idx);
        }
        std::sort(out.begin(), out.end());
        from_env = !out.empty();
        if (from_env) return IBEX_OK;
    }
    for (int i = first; i < first + n; ++i)
        if (!topo.devices[i].rdma.empty()) out.push_back(i);
    if (out.empty())
        for (int i = first; i < first + n; ++i) out.push_back(i);
    if (out.empty()) return fail(IBEX_ERR_NO_DEVICE, "no network device on this host to bind to");
    return IBEX_OK;
}

struct Choice {
    Nics order;  // nearest first, the rank's own rail at the front
    ibex_path_type_t path = IBEX_PATH_NONE;
};

// The candidates at the best path type from `from`, in device order.
Nics best_nics(const ibex_topology &topo, const Device &from, const Nics &cands, ibex_path_type_t &best) {
    best = IBEX_PATH_SYS;
    for (int i : cands) best = std::min(best, path_type(topo, from, topo.devices[i]));
    Nics out;
    for (int i : cands)
        if (path_type(topo, from, topo.devices[i]) == best) out.push_back(i);
    return out;
}

// Puts `rail` first, then the rest of `best` after it (wrapping), then everything else
// by path type from the anchor.
Nics order_from(const ibex_topology &topo, const Device *anchor, const Nics &cands, const Nics &best, size_t rail) {
    Nics out;
    for (size_t k = 0; k < best.size(); ++k) out.push_back(best[(rail + k) % best.size()]);
    Nics rest;
    for (int i : cands)
        if (std::find(best.begin(), best.end(), i) == best.end()) rest.push_back(i);
    if (anchor)
        std::stable_sort(rest.begin(), rest.end(), [&](int x, int y) {
            return path_type(topo, *anchor, topo.devices[x]) < path_type(topo, *anchor, topo.devices[y]);
        });
    out.insert(out.end(), rest.begin(), rest.end());
    return out;
}

// Rail alignment: GPUs with the same set of best NICs take them in turn, in GPU order.
Choice choose_for_gpu(const ibex_topology &topo, int gpu, const Nics &cands) {
    const Device &g = topo.of_kind(IBEX_TOPO_GPU, gpu);
    ibex_path_type_t best_path;
    Nics best = best_nics(topo, g, cands, best_path);
    size_t pos = 0;
    for (int other = 0; other < gpu; ++other) {
        ibex_path_type_t p;
        if (best_nics(topo, topo.of_kind(IBEX_TOPO_GPU, other), cands, p) == best) ++pos;
    }
    return {order_from(topo, &g, cands, best, pos % best.size()), best_path};
}

// Without a GPU the anchor is the rank's cores: NICs local to them are PHB, others SYS.
Choice choose_for_cpus(const ibex_topology &topo, hwloc_const_bitmap_t cpus, int local_rank, const Nics &cands) {
    auto path = [&](int i) {
        const Device &d = topo.devices[i];
        return d.locality_known && hwloc_bitmap_intersects(d.cpuset.get(), cpus) ? IBEX_PATH_PHB : IBEX_PATH_SYS;
    };
    ibex_path_type_t best_path = IBEX_PATH_SYS;
    for (int i : cands) best_path = std::min(best_path, path(i));
    Nics best;
    for (int i : cands)
        if (path(i) == best_path) best.push_back(i);
    return {order_from(topo, nullptr, cands, best, static_cast<size_t>(local_rank) % best.size()), best_path};
}

Choice choose_unanchored(const ibex_topology &topo, int local_rank, const Nics &cands) {
    return {order_from(topo, nullptr, cands, cands, static_cast<size_t>(local_rank) % cands.size()), IBEX_PATH_NONE};
}

// Slot of a GPU among the GPUs whose rails share its NIC's local CPUs: ranks on one socket
// then take different progress cores. (With IBEX_NUMA every rank draws from one node, and
// the GPU ordinal is the slot.)
int gpu_slot(const ibex_topology &topo, int gpu, const Nics &cands) {
    auto nic_cpus = [&](int g) { return topo.devices[choose_for_gpu(topo, g, cands).order.front()].cpuset.get(); };
    hwloc_const_bitmap_t mine = nic_cpus(gpu);
    int slot = 0;
    for (int other = 0; other < gpu; ++other)
        if (hwloc_bitmap_isequal(nic_cpus(other), mine)) ++slot;
    return slot;
}

const Device *numa_device(const ibex_topology &topo, int os_index) {
    for (int i = 0; i < topo.count[IBEX_TOPO_NUMA]; ++i) {
        const Device &d = topo.of_kind(IBEX_TOPO_NUMA, i);
        if (d.numa_node == os_index) return &d;
    }
    return nullptr;
}

// One hardware thread per core of the pool, in core order.
std::vector<int> core_threads(const ibex_topology &topo, hwloc_const_bitmap_t pool, hwloc_const_bitmap_t avoid) {
    hwloc_topology_t hw = topo.hw.get();
    std::vector<int> all, free;
    hwloc_obj_type_t type = hwloc_get_nbobjs_by_type(hw, HWLOC_OBJ_CORE) > 0 ? HWLOC_OBJ_CORE : HWLOC_OBJ_PU;
    Bitmap both = bitmap_new();
    for (hwloc_obj_t c = nullptr; (c = hwloc_get_next_obj_by_type(hw, type, c));) {
        hwloc_bitmap_and(both.get(), c->cpuset, pool);
        if (hwloc_bitmap_iszero(both.get())) continue;
        int pu = hwloc_bitmap_first(both.get());
        all.push_back(pu);
        if (!avoid || !hwloc_bitmap_intersects(c->cpuset, avoid)) free.push_back(pu);
    }
    return free.empty() ? all : free;
}

ibex_status_t copy_list(char (&dst)[IBEX_CPULIST_LEN], const std::string &src, const char *what) {
    if (src.size() >= IBEX_CPULIST_LEN)
        return fail(IBEX_ERR_INTERNAL, "%s list of %zu characters does not fit the binding", what, src.size());
    std::memcpy(dst, src.c_str(), src.size() + 1);
    return IBEX_OK;
}

} // namespace

ibex_status_t bind(const ibex_topology &topo, const ibex_bind_request_t &req, ibex_binding_t &out) {
    const int ngpu = topo.count[IBEX_TOPO_GPU];
    int gpu = req.gpu;
    if (gpu == IBEX_BIND_GPU_FROM_RANK) gpu = ngpu > 0 ? req.local_rank % ngpu : IBEX_BIND_GPU_NONE;
    if (gpu < IBEX_BIND_GPU_NONE || gpu >= ngpu)
        return fail(IBEX_ERR_INVALID_ARGUMENT, "GPU %d requested, this host has %d", req.gpu, ngpu);

    Bitmap cpus;
    if (req.cpus) {
        cpus = bitmap_new();
        if (hwloc_bitmap_list_sscanf(cpus.get(), req.cpus) != 0 ||
            !hwloc_bitmap_intersects(cpus.get(), hwloc_topology_get_topology_cpuset(topo.hw.get())))
            return fail(IBEX_ERR_INVALID_ARGUMENT, "cpus \"%s\" is not a list of this host's CPUs (%s)", req.cpus,
                        bitmap_list(hwloc_topology_get_topology_cpuset(topo.hw.get())).c_str());
    }

    Nics cands;
    bool nic_env = false;
    IBEX_TRY(candidates(topo, cands, nic_env));

    int64_t env_node = config::get_int("IBEX_NUMA", -1, -1, INT_MAX);
    const bool numa_env = env_node >= 0;
    if (numa_env && !numa_device(topo, static_cast<int>(env_node))) {
        std::string have;
        for (int i = 0; i < topo.count[IBEX_TOPO_NUMA]; ++i) {
            if (!have.empty()) have += ',';
            have += std::to_string(topo.of_kind(IBEX_TOPO_NUMA, i).numa_node);
        }
        return fail(IBEX_ERR_INVALID_ARGUMENT, "IBEX_NUMA=%lld: this host has no such NUMA node (nodes: %s)",
                    static_cast<long long>(env_node), have.c_str());
    }

    Choice choice;
    int slot = req.local_rank;
    if (gpu >= 0) {
        choice = choose_for_gpu(topo, gpu, cands);
        slot = numa_env ? gpu : gpu_slot(topo, gpu, cands);
    } else if (cpus) {
        choice = choose_for_cpus(topo, cpus.get(), req.local_rank, cands);
    } else {
        choice = choose_unanchored(topo, req.local_rank, cands);
    }
    const Device &nic = topo.devices[choice.order.front()];

    // Memory goes where the NIC reads it; an unknown NIC locality falls back to the GPU's,
    // then to the cores', and otherwise to no preference (never silently node 0).
    int numa = -1;
    if (numa_env) {
        numa = static_cast<int>(env_node);
    } else if (nic.numa_node >= 0) {
        numa = nic.numa_node;
    } else if (gpu >= 0 && topo.of_kind(IBEX_TOPO_GPU, gpu).numa_node >= 0) {
        numa = topo.of_kind(IBEX_TOPO_GPU, gpu).numa_node;
    } else if (cpus) {
        for (int i = 0; i < topo.count[IBEX_TOPO_NUMA]; ++i) {
            const Device &n = topo.of_kind(IBEX_TOPO_NUMA, i);
            if (hwloc_bitmap_isincluded(cpus.get(), n.cpuset.get())) numa = n.numa_node;
        }
    }

    hwloc_const_bitmap_t pool = hwloc_topology_get_topology_cpuset(topo.hw.get());
    if (numa_env) pool = numa_device(topo, numa)->cpuset.get();
    else if (nic.locality_known) pool = nic.cpuset.get();
    else if (numa >= 0) pool = numa_device(topo, numa)->cpuset.get();

    // From the top of the pool down: the low cores are where the OS and launchers put the
    // training processes first.
    std::vector<int> threads = core_threads(topo, pool, cpus.get());
    Bitmap progress = bitmap_new();
    const int n = static_cast<int>(threads.size());
    for (int k = 0; k < req.progress_cpus && n > 0; ++k)
        hwloc_bitmap_set(progress.get(), threads[n - 1 - (slot * req.progress_cpus + k) % n]);

    uint32_t size = out.size;
    std::memset(&out, 0, sizeof out);
    out.size = size;
    out.flags = (nic_env ? IBEX_BINDING_NIC_FROM_ENV : 0) | (numa_env ? IBEX_BINDING_NUMA_FROM_ENV : 0);
    out.gpu = gpu;
    out.nic_count = std::min<int>(req.max_nics, static_cast<int>(choice.order.size()));
    for (int i = 0; i < out.nic_count; ++i) out.nics[i] = choice.order[i];
    out.path = choice.path;
    out.numa_node = numa;
    out.slot = slot;
    IBEX_TRY(copy_list(out.progress_cpus, bitmap_list(progress.get()), "progress CPU"));
    IBEX_TRY(copy_list(out.nic_cpus, bitmap_list(pool), "NIC CPU"));

    const std::string anchor = (gpu >= 0 ? topo.of_kind(IBEX_TOPO_GPU, gpu).label : std::string("no GPU")) +
                               (req.cpus ? std::string(", cpus ") + req.cpus : std::string());
    IBEX_LOG(info, "binding local rank %d/%d (%s) -> %s (%s, netdev %s, %s%s), NUMA %d%s, progress cpus %s of %s",
             req.local_rank, req.local_size, anchor.c_str(), nic.label.c_str(), nic.name.c_str(),
             nic.netdev.empty() ? "-" : nic.netdev.c_str(), ibex_path_type_str(choice.path),
             nic_env ? ", from IBEX_NIC" : "", numa, numa_env ? " (IBEX_NUMA)" : "", out.progress_cpus,
             out.nic_cpus);
    return IBEX_OK;
}

} // namespace ibex::topo
