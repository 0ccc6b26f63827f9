// The exported tables: ncclNetPlugin_v8 to _v12, each the version-independent calls of
// state.h behind that version's signatures (nccl_net_abi.h). These five symbols are all
// the library exports.
#include <cstddef>
#include <cstring>
#include <vector>

#include "plugins/nccl-net/state.h"

#define IBEX_NCCL_EXPORT extern "C" __attribute__((visibility("default")))

// The layouts NCCL's structs have on x86-64 and aarch64 (LP64), from the field lists.
static_assert(sizeof(ncclNetProperties_v9_t) == 104 && offsetof(ncclNetProperties_v9_t, maxP2pBytes) == 88);
static_assert(sizeof(ncclNetProperties_v11_t) == 112 && offsetof(ncclNetProperties_v11_t, maxMultiRequestSize) == 104);
static_assert(sizeof(ncclNetProperties_v12_t) == 128 && offsetof(ncclNetProperties_v12_t, maxP2pBytes) == 104 &&
              offsetof(ncclNetProperties_v12_t, railId) == 124);
static_assert(sizeof(ncclNetAttr_v11_t) == 44);

namespace ibex_nccl {
namespace {

// v9's properties of `dev`, which every other layout is filled from.
ncclResult_t base_properties(int dev, const void *props, ncclNetProperties_v9_t *p) {
    return props == nullptr ? ncclInvalidArgument : properties(dev, p);
}

ncclResult_t properties_v8(int dev, ncclNetProperties_v8_t *props) {
    ncclNetProperties_v9_t p{};
    if (const ncclResult_t r = base_properties(dev, props, &p); r != ncclSuccess)
        return r;
    *props = ncclNetProperties_v8_t{p.name,     p.pciPath,  p.guid,          p.ptrSupport,
                                    p.regIsGlobal, p.speed, p.port,          p.latency,
                                    p.maxComms, p.maxRecvs, p.netDeviceType, p.netDeviceVersion};
    return ncclSuccess;
}

ncclResult_t connect_v8(int dev, void *handle, void **send_comm, ncclNetDeviceHandle_t ** /*dev_comm*/) {
    return connect(dev, handle, send_comm, -1);
}

ncclResult_t connect_v10(int dev, ncclNetCommConfig_v10_t *config, void *handle, void **send_comm,
                         ncclNetDeviceHandle_t ** /*dev_comm*/) {
    return connect(dev, handle, send_comm, config != nullptr ? config->trafficClass : -1);
}

ncclResult_t accept_v8(void *listen_comm, void **recv_comm, ncclNetDeviceHandle_t ** /*dev_comm*/) {
    return accept(listen_comm, recv_comm);
}

ncclResult_t reg_mr_dmabuf(void *comm, void *data, size_t size, int type, uint64_t /*offset*/,
                           int /*fd*/, void **mhandle) {
    // ibex recognises CUDA memory by its address and registers it its own way (dma-buf
    // on verbs, staging on the soft providers), so the file descriptor is not needed.
    return reg_mr(comm, data, size, type & (NCCL_PTR_HOST | NCCL_PTR_CUDA), mhandle);
}

ncclResult_t isend_v8(void *send_comm, void *data, int size, int tag, void *mhandle, void **request) {
    if (size < 0)
        return ncclInvalidArgument;
    return isend(send_comm, data, static_cast<size_t>(size), tag, mhandle, request);
}

ncclResult_t isend_v10(void *send_comm, void *data, size_t size, int tag, void *mhandle,
                       void * /*profiler_handle*/, void **request) {
    return isend(send_comm, data, size, tag, mhandle, request);
}

ncclResult_t irecv_v8(void *recv_comm, int n, void **data, int *sizes, int *tags, void **mhandles,
                      void **request) {
    if (sizes == nullptr || n < 1 || n > kMaxRecvs)
        return ncclInvalidArgument;
    size_t wide[kMaxRecvs];
    for (int i = 0; i < n; ++i) {
        if (sizes[i] < 0)
            return ncclInvalidArgument;
        wide[i] = static_cast<size_t>(sizes[i]);
    }
    return irecv(recv_comm, n, data, wide, tags, mhandles, request);
}

ncclResult_t irecv_v9(void *recv_comm, int n, void **data, size_t *sizes, int *tags, void **mhandles,
                      void **request) {
    return irecv(recv_comm, n, data, sizes, tags, mhandles, request);
}

ncclResult_t irecv_v10(void *recv_comm, int n, void **data, size_t *sizes, int *tags, void **mhandles,
                       void ** /*profiler_handles*/, void **request) {
    return irecv(recv_comm, n, data, sizes, tags, mhandles, request);
}

ncclResult_t iflush_any(void *recv_comm, int n, void ** /*data*/, int * /*sizes*/, void ** /*mhandles*/,
                        void **request) {
    return iflush(recv_comm, n, request);
}

ncclResult_t init_v10(ncclDebugLogger_t logger, ncclProfilerCallback_t /*profiler*/) { return init(logger); }

ncclResult_t init_v11(void **ctx, uint64_t comm_id, ncclNetCommConfig_v11_t *config, ncclDebugLogger_t logger,
                      ncclProfilerCallback_t /*profiler*/) {
    return init_context(ctx, comm_id, config, logger);
}

// v11 and v12 properties: v9's, then the fields those versions add or move.
template <typename Props>
ncclResult_t properties_from_v9(int dev, Props *props) {
    ncclNetProperties_v9_t p{};
    if (const ncclResult_t r = base_properties(dev, props, &p); r != ncclSuccess)
        return r;
    *props = Props{};
    props->name = p.name;
    props->pciPath = p.pciPath;
    props->guid = p.guid;
    props->ptrSupport = p.ptrSupport;
    props->regIsGlobal = p.regIsGlobal;
    props->forceFlush = p.forceFlush;
    props->speed = p.speed;
    props->port = p.port;
    props->latency = p.latency;
    props->maxComms = p.maxComms;
    props->maxRecvs = p.maxRecvs;
    props->netDeviceType = p.netDeviceType;
    props->netDeviceVersion = p.netDeviceVersion;
    props->vProps.ndevs = p.vProps.ndevs;
    for (int i = 0; i < p.vProps.ndevs && i < NCCL_NET_MAX_DEVS_PER_NIC; ++i)
        props->vProps.devs[i] = p.vProps.devs[i];
    props->maxP2pBytes = p.maxP2pBytes;
    props->maxCollBytes = p.maxCollBytes;
    props->maxMultiRequestSize = 1; // an isend or irecv is one request
    return ncclSuccess;
}

ncclResult_t properties_v11(int dev, ncclNetProperties_v11_t *props) { return properties_from_v9(dev, props); }

ncclResult_t properties_v12(int dev, ncclNetProperties_v12_t *props) {
    const ncclResult_t r = properties_from_v9(dev, props);
    if (r == ncclSuccess) {
        props->railId = NCCL_NET_ID_UNDEF; // ibex_topo_bind knows rails; NCCL's numbering is its own
        props->planeId = NCCL_NET_ID_UNDEF;
    }
    return r;
}

ncclResult_t listen_v11(void *ctx, int dev, void *handle, void **listen_comm) {
    if (!context_valid(ctx))
        return ncclInvalidArgument;
    return ibex_nccl::listen(dev, handle, listen_comm);
}

ncclResult_t connect_v11(void *ctx, int dev, void *handle, void **send_comm, ncclNetDeviceHandle_t **dev_comm) {
    if (!context_valid(ctx))
        return ncclInvalidArgument;
    (void)dev_comm;
    return connect(dev, handle, send_comm, context_traffic_class(ctx));
}

ncclResult_t set_net_attr_v11(void *ctx, ncclNetAttr_v11_t *attr) { return set_net_attr(ctx, attr); }

ncclResult_t make_vdevice_v12(int *d, ncclNetVDeviceProps_v12_t * /*props*/) { return make_vdevice(d, nullptr); }

} // namespace
} // namespace ibex_nccl

using namespace ibex_nccl;

IBEX_NCCL_EXPORT const ncclNet_v8_t ncclNetPlugin_v8 = {
    "IBEX",       init,       devices,    properties_v8, ibex_nccl::listen,     connect_v8, accept_v8,
    reg_mr,       reg_mr_dmabuf, dereg_mr, isend_v8,     irecv_v8,   iflush_any, test,
    close_send,   close_recv, close_listen, nullptr,     nullptr,
};

IBEX_NCCL_EXPORT const ncclNet_v9_t ncclNetPlugin_v9 = {
    "IBEX",     init,       devices,      properties, ibex_nccl::listen,     connect_v8, accept_v8,
    reg_mr,     reg_mr_dmabuf, dereg_mr,  isend,      irecv_v9,   iflush_any, test,
    close_send, close_recv, close_listen, nullptr,    nullptr,    make_vdevice,
};

IBEX_NCCL_EXPORT const ncclNet_v10_t ncclNetPlugin_v10 = {
    "IBEX",     init_v10,   devices,      properties, ibex_nccl::listen,     connect_v10, accept_v8,
    reg_mr,     reg_mr_dmabuf, dereg_mr,  isend_v10,  irecv_v10,  iflush_any,  test,
    close_send, close_recv, close_listen, nullptr,    nullptr,    make_vdevice,
};

IBEX_NCCL_EXPORT const ncclNet_v11_t ncclNetPlugin_v11 = {
    "IBEX",     init_v11,   devices,      properties_v11, listen_v11, connect_v11, accept_v8,
    reg_mr,     reg_mr_dmabuf, dereg_mr,  isend_v10,      irecv_v10,  iflush_any,  test,
    close_send, close_recv, close_listen, nullptr,        nullptr,    make_vdevice,
    finalize_context, set_net_attr_v11,
};

IBEX_NCCL_EXPORT const ncclNet_v12_t ncclNetPlugin_v12 = {
    "IBEX",     init_v11,   devices,      properties_v12, listen_v11, connect_v11, accept_v8,
    reg_mr,     reg_mr_dmabuf, dereg_mr,  isend_v10,      irecv_v10,  iflush_any,  test,
    close_send, close_recv, close_listen, nullptr,        nullptr,    make_vdevice_v12,
    finalize_context, set_net_attr_v11,
};
