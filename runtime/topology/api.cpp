// The C API of <ibex/topology.h>: argument checks, then the C++ model.
#include "runtime/base/config.h"
#include "runtime/base/status.h"
#include "runtime/topology/model.h"

#include <cerrno>
#include <cstring>

namespace {

using ibex::fail;

bool valid_index(const ibex_topology_t *topo, int i) {
    return topo && i >= 0 && i < static_cast<int>(topo->devices.size());
}

bool valid_kind(ibex_topo_kind_t kind) { return kind >= IBEX_TOPO_GPU && kind <= IBEX_TOPO_NUMA; }

} // namespace

extern "C" {

const char *ibex_path_type_str(ibex_path_type_t type) {
    switch (type) {
    case IBEX_PATH_NONE: return "-";
    case IBEX_PATH_X: return "X";
    case IBEX_PATH_PIX: return "PIX";
    case IBEX_PATH_PXB: return "PXB";
    case IBEX_PATH_PHB: return "PHB";
    case IBEX_PATH_NODE: return "NODE";
    case IBEX_PATH_SYS: return "SYS";
    }
    return "?";
}

ibex_status_t ibex_topo_load(const char *xml_path, ibex_topology_t **topo) {
    if (!topo) return fail(IBEX_ERR_INVALID_ARGUMENT, "ibex_topo_load: null topology pointer");
    *topo = nullptr;
    // NULL means "wherever the user pointed IBEX_TOPO_FILE", else this machine.
    std::string path = xml_path ? xml_path : ibex::config::get_string("IBEX_TOPO_FILE", "");
    std::unique_ptr<ibex_topology> t;
    IBEX_TRY(ibex::topo::load(path, t));
    *topo = t.release();
    return IBEX_OK;
}

void ibex_topo_free(ibex_topology_t *topo) { delete topo; }

ibex_status_t ibex_topo_export_xml(const ibex_topology_t *topo, const char *path) {
    if (!topo || !path) return fail(IBEX_ERR_INVALID_ARGUMENT, "ibex_topo_export_xml: null argument");
    if (hwloc_topology_export_xml(topo->hw.get(), path, 0) != 0)
        return ibex::fail_errno(IBEX_ERR_SYSTEM, errno, "cannot write hwloc XML to %s", path);
    return IBEX_OK;
}

const char *ibex_topo_source(const ibex_topology_t *topo) { return topo ? topo->source.c_str() : ""; }

const char *ibex_topo_hostname(const ibex_topology_t *topo) { return topo ? topo->hostname.c_str() : ""; }

int ibex_topo_device_count(const ibex_topology_t *topo) {
    return topo ? static_cast<int>(topo->devices.size()) : -1;
}

int ibex_topo_count(const ibex_topology_t *topo, ibex_topo_kind_t kind) {
    return topo && valid_kind(kind) ? topo->count[kind] : -1;
}

ibex_status_t ibex_topo_index(const ibex_topology_t *topo, ibex_topo_kind_t kind, int ordinal, int *index) {
    if (!topo || !index || !valid_kind(kind))
        return fail(IBEX_ERR_INVALID_ARGUMENT, "ibex_topo_index: null argument or bad kind");
    if (ordinal < 0 || ordinal >= topo->count[kind])
        return fail(IBEX_ERR_NO_DEVICE, "ibex_topo_index: ordinal %d out of %d", ordinal, topo->count[kind]);
    *index = topo->first[kind] + ordinal;
    return IBEX_OK;
}

ibex_status_t ibex_topo_find(const ibex_topology_t *topo, const char *name, int *index) {
    if (!topo || !name || !index) return fail(IBEX_ERR_INVALID_ARGUMENT, "ibex_topo_find: null argument");
    int i = ibex::topo::find_device(*topo, name);
    if (i < 0) return fail(IBEX_ERR_NO_DEVICE, "no device called \"%s\" in this topology", name);
    *index = i;
    return IBEX_OK;
}

ibex_status_t ibex_topo_device(const ibex_topology_t *topo, int index, ibex_topo_device_t *info) {
    if (!info || info->size < sizeof(ibex_topo_device_t))
        return fail(IBEX_ERR_INVALID_ARGUMENT, "ibex_topo_device: info is null or its size is not set");
    if (!valid_index(topo, index)) return fail(IBEX_ERR_INVALID_ARGUMENT, "ibex_topo_device: bad index %d", index);
    const ibex::topo::Device &d = topo->devices[index];
    uint32_t size = info->size;
    std::memset(info, 0, sizeof *info);
    info->size = size;
    info->kind = d.kind;
    info->ordinal = d.ordinal;
    info->label = d.label.c_str();
    info->name = d.name.c_str();
    info->pci_busid = d.busid.c_str();
    info->model = d.model.c_str();
    info->rdma_device = d.rdma.c_str();
    info->netdev = d.netdev.c_str();
    info->cpus = d.cpus_list.c_str();
    info->numa_nodes = d.nodes_list.c_str();
    info->numa_node = d.numa_node;
    info->link_width = d.link_width;
    info->link_speed_gbs = d.link_speed;
    return IBEX_OK;
}

ibex_status_t ibex_topo_path(const ibex_topology_t *topo, int i, int j, ibex_path_type_t *type) {
    if (!type || !valid_index(topo, i) || !valid_index(topo, j))
        return fail(IBEX_ERR_INVALID_ARGUMENT, "ibex_topo_path: bad device index (%d, %d)", i, j);
    *type = ibex::topo::path_type(*topo, topo->devices[i], topo->devices[j]);
    return IBEX_OK;
}

ibex_status_t ibex_topo_bind(const ibex_topology_t *topo, const ibex_bind_request_t *req, ibex_binding_t *binding) {
    static const ibex_bind_request_t defaults = IBEX_BIND_REQUEST_INIT;
    if (!topo || !binding || binding->size < sizeof(ibex_binding_t))
        return fail(IBEX_ERR_INVALID_ARGUMENT, "ibex_topo_bind: null argument or binding size not set");
    if (!req) req = &defaults;
    if (req->size < sizeof(ibex_bind_request_t) || req->magic != IBEX_MAGIC_BIND_REQUEST ||
        req->version != IBEX_ATTR_VERSION)
        return fail(IBEX_ERR_INVALID_ARGUMENT, "ibex_topo_bind: request not initialised with IBEX_BIND_REQUEST_INIT");
    if (req->local_size < 1 || req->local_rank < 0 || req->local_rank >= req->local_size)
        return fail(IBEX_ERR_INVALID_ARGUMENT, "ibex_topo_bind: local rank %d of %d", req->local_rank,
                    req->local_size);
    if (req->max_nics < 1 || req->max_nics > IBEX_BIND_MAX_NICS || req->progress_cpus < 1)
        return fail(IBEX_ERR_INVALID_ARGUMENT, "ibex_topo_bind: max_nics %d (1..%d), progress_cpus %d (>= 1)",
                    req->max_nics, IBEX_BIND_MAX_NICS, req->progress_cpus);
    return ibex::topo::bind(*topo, *req, *binding);
}

} // extern "C"
