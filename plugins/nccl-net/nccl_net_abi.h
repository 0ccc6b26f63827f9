/*
 * The NCCL network-plugin ABI as ibex implements it, written from the ABI facts (no NCCL
 * header is copied or needed). NCCL dlopens libnccl-net-<NCCL_NET_PLUGIN>.so and looks
 * up `ncclNetPlugin_v<N>`, newest N first; each is a table of function pointers whose
 * layout is fixed per N. Layouts stated here:
 *
 *   v8  (NCCL 2.19-2.22): properties gain regIsGlobal and the device-offload fields;
 *       regMr takes a size_t; isend/irecv sizes are int.
 *   v9  (NCCL 2.23-2.24): isend/irecv sizes become size_t; properties gain forceFlush,
 *       the virtual-NIC description (vProps) and the per-operation byte limits;
 *       makeVDevice is added.
 *   v10 (NCCL 2.25-2.26): init takes a profiler callback, connect a per-comm config
 *       (traffic class), isend/irecv a profiler handle each; properties as v9.
 *   v11 (NCCL 2.28-2.29): NCCL may init the plugin once per communicator: init takes
 *       the communicator's id and config and returns a context, which listen and
 *       connect take (connect loses the config) and a new finalize releases; properties
 *       gain maxMultiRequestSize at the end; setNetAttr (a context and NCCL's hints on
 *       peers and flows per comm) follows finalize. NCCL calls setNetAttr only when the
 *       entry is not NULL.
 *   v12 (NCCL 2.30): as v11, but a virtual NIC lists up to 8 devices (devs[8], so
 *       every later property moves) and properties end with a rail and a plane id
 *       (int16 each, -1 undefined).
 * The device-handle struct (device offload, unused by ibex) is the same in every one.
 */
#ifndef IBEX_NCCL_NET_ABI_H
#define IBEX_NCCL_NET_ABI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    ncclSuccess = 0,
    ncclUnhandledCudaError = 1,
    ncclSystemError = 2,
    ncclInternalError = 3,
    ncclInvalidArgument = 4,
    ncclInvalidUsage = 5,
    ncclRemoteError = 6,
    ncclInProgress = 7,
} ncclResult_t;

typedef enum {
    NCCL_LOG_NONE = 0,
    NCCL_LOG_VERSION = 1,
    NCCL_LOG_WARN = 2,
    NCCL_LOG_INFO = 3,
    NCCL_LOG_ABORT = 4,
    NCCL_LOG_TRACE = 5,
} ncclDebugLogLevel;

enum { NCCL_INIT = 1, NCCL_NET = 16 }; /* subsystem flags passed with a log line */

typedef void (*ncclDebugLogger_t)(ncclDebugLogLevel level, unsigned long flags, const char *file,
                                  int line, const char *fmt, ...);
/* v10: events for NCCL's profiler plugin; ibex reports none. */
typedef ncclResult_t (*ncclProfilerCallback_t)(void **event_handle, int type, void *parent_handle,
                                               int64_t plugin_id, void *ext_data);

#define NCCL_NET_HANDLE_MAXSIZE 128 /* bytes NCCL carries from listen() to connect() */
#define NCCL_PTR_HOST 0x1
#define NCCL_PTR_CUDA 0x2
#define NCCL_PTR_DMABUF 0x4
#define NCCL_NET_MAX_REQUESTS 32     /* outstanding requests per comm NCCL may post (v8+) */
#define NCCL_NET_MAX_DEVS_PER_NIC 4  /* v9+: physical devices behind one virtual NIC */

typedef enum { NCCL_NET_DEVICE_HOST = 0, NCCL_NET_DEVICE_UNPACK = 1 } ncclNetDeviceType;

/* Device-side offload of a comm; host-only plugins (ibex) never fill one in. */
typedef struct {
    ncclNetDeviceType netDeviceType;
    int netDeviceVersion;
    void *handle;
    size_t size;
    int needsProxyProgress;
} ncclNetDeviceHandle_t; /* same layout in v8 to v12 */

typedef struct {
    char *name;
    char *pciPath;
    uint64_t guid;
    int ptrSupport; /* NCCL_PTR_* */
    int regIsGlobal;
    int speed; /* Mbit/s */
    int port;
    float latency; /* microseconds */
    int maxComms;
    int maxRecvs; /* largest n of a grouped irecv */
    ncclNetDeviceType netDeviceType;
    int netDeviceVersion;
} ncclNetProperties_v8_t;

typedef struct {
    int ndevs;
    int devs[NCCL_NET_MAX_DEVS_PER_NIC];
} ncclNetVDeviceProps_v9_t;

typedef struct {
    char *name;
    char *pciPath;
    uint64_t guid;
    int ptrSupport;
    int regIsGlobal;
    int forceFlush; /* flush after every receive even when not asked for */
    int speed;
    int port;
    float latency;
    int maxComms;
    int maxRecvs;
    ncclNetDeviceType netDeviceType;
    int netDeviceVersion;
    ncclNetVDeviceProps_v9_t vProps;
    size_t maxP2pBytes;  /* largest isend/irecv for point-to-point */
    size_t maxCollBytes; /* ... and for collectives */
} ncclNetProperties_v9_t;
typedef ncclNetProperties_v9_t ncclNetProperties_v10_t;

typedef struct {
    int trafficClass; /* -1: undefined */
} ncclNetCommConfig_v10_t;

typedef struct {
    const char *name;
    ncclResult_t (*init)(ncclDebugLogger_t logger);
    ncclResult_t (*devices)(int *ndev);
    ncclResult_t (*getProperties)(int dev, ncclNetProperties_v8_t *props);
    ncclResult_t (*listen)(int dev, void *handle, void **listen_comm);
    ncclResult_t (*connect)(int dev, void *handle, void **send_comm,
                            ncclNetDeviceHandle_t **send_dev_comm);
    ncclResult_t (*accept)(void *listen_comm, void **recv_comm,
                           ncclNetDeviceHandle_t **recv_dev_comm);
    ncclResult_t (*regMr)(void *comm, void *data, size_t size, int type, void **mhandle);
    ncclResult_t (*regMrDmaBuf)(void *comm, void *data, size_t size, int type, uint64_t offset,
                                int fd, void **mhandle);
    ncclResult_t (*deregMr)(void *comm, void *mhandle);
    ncclResult_t (*isend)(void *send_comm, void *data, int size, int tag, void *mhandle,
                          void **request);
    ncclResult_t (*irecv)(void *recv_comm, int n, void **data, int *sizes, int *tags,
                          void **mhandles, void **request);
    ncclResult_t (*iflush)(void *recv_comm, int n, void **data, int *sizes, void **mhandles,
                           void **request);
    ncclResult_t (*test)(void *request, int *done, int *sizes);
    ncclResult_t (*closeSend)(void *send_comm);
    ncclResult_t (*closeRecv)(void *recv_comm);
    ncclResult_t (*closeListen)(void *listen_comm);
    ncclResult_t (*getDeviceMr)(void *comm, void *mhandle, void **dptr_mhandle);
    ncclResult_t (*irecvConsumed)(void *recv_comm, int n, void *request);
} ncclNet_v8_t;

typedef struct {
    const char *name;
    ncclResult_t (*init)(ncclDebugLogger_t logger);
    ncclResult_t (*devices)(int *ndev);
    ncclResult_t (*getProperties)(int dev, ncclNetProperties_v9_t *props);
    ncclResult_t (*listen)(int dev, void *handle, void **listen_comm);
    ncclResult_t (*connect)(int dev, void *handle, void **send_comm,
                            ncclNetDeviceHandle_t **send_dev_comm);
    ncclResult_t (*accept)(void *listen_comm, void **recv_comm,
                           ncclNetDeviceHandle_t **recv_dev_comm);
    ncclResult_t (*regMr)(void *comm, void *data, size_t size, int type, void **mhandle);
    ncclResult_t (*regMrDmaBuf)(void *comm, void *data, size_t size, int type, uint64_t offset,
                                int fd, void **mhandle);
    ncclResult_t (*deregMr)(void *comm, void *mhandle);
    ncclResult_t (*isend)(void *send_comm, void *data, size_t size, int tag, void *mhandle,
                          void **request);
    ncclResult_t (*irecv)(void *recv_comm, int n, void **data, size_t *sizes, int *tags,
                          void **mhandles, void **request);
    ncclResult_t (*iflush)(void *recv_comm, int n, void **data, int *sizes, void **mhandles,
                           void **request);
    ncclResult_t (*test)(void *request, int *done, int *sizes);
    ncclResult_t (*closeSend)(void *send_comm);
    ncclResult_t (*closeRecv)(void *recv_comm);
    ncclResult_t (*closeListen)(void *listen_comm);
    ncclResult_t (*getDeviceMr)(void *comm, void *mhandle, void **dptr_mhandle);
    ncclResult_t (*irecvConsumed)(void *recv_comm, int n, void *request);
    ncclResult_t (*makeVDevice)(int *d, ncclNetVDeviceProps_v9_t *props);
} ncclNet_v9_t;

typedef struct {
    const char *name;
    ncclResult_t (*init)(ncclDebugLogger_t logger, ncclProfilerCallback_t profiler);
    ncclResult_t (*devices)(int *ndev);
    ncclResult_t (*getProperties)(int dev, ncclNetProperties_v10_t *props);
    ncclResult_t (*listen)(int dev, void *handle, void **listen_comm);
    ncclResult_t (*connect)(int dev, ncclNetCommConfig_v10_t *config, void *handle,
                            void **send_comm, ncclNetDeviceHandle_t **send_dev_comm);
    ncclResult_t (*accept)(void *listen_comm, void **recv_comm,
                           ncclNetDeviceHandle_t **recv_dev_comm);
    ncclResult_t (*regMr)(void *comm, void *data, size_t size, int type, void **mhandle);
    ncclResult_t (*regMrDmaBuf)(void *comm, void *data, size_t size, int type, uint64_t offset,
                                int fd, void **mhandle);
    ncclResult_t (*deregMr)(void *comm, void *mhandle);
    ncclResult_t (*isend)(void *send_comm, void *data, size_t size, int tag, void *mhandle,
                          void *profiler_handle, void **request);
    ncclResult_t (*irecv)(void *recv_comm, int n, void **data, size_t *sizes, int *tags,
                          void **mhandles, void **profiler_handles, void **request);
    ncclResult_t (*iflush)(void *recv_comm, int n, void **data, int *sizes, void **mhandles,
                           void **request);
    ncclResult_t (*test)(void *request, int *done, int *sizes);
    ncclResult_t (*closeSend)(void *send_comm);
    ncclResult_t (*closeRecv)(void *recv_comm);
    ncclResult_t (*closeListen)(void *listen_comm);
    ncclResult_t (*getDeviceMr)(void *comm, void *mhandle, void **dptr_mhandle);
    ncclResult_t (*irecvConsumed)(void *recv_comm, int n, void *request);
    ncclResult_t (*makeVDevice)(int *d, ncclNetVDeviceProps_v9_t *props);
} ncclNet_v10_t;

/* v11 and v12: the per-communicator config init receives (as v10's connect did). */
typedef ncclNetCommConfig_v10_t ncclNetCommConfig_v11_t;

/* v11 and v12 properties: v9's fields with the version's vNIC struct, then theirs. */
#define IBEX_NCCL_NET_V11_PROPERTIES(vprops_t)                                                       \
    char *name;                                                                                      \
    char *pciPath;                                                                                   \
    uint64_t guid;                                                                                   \
    int ptrSupport;                                                                                  \
    int regIsGlobal;                                                                                 \
    int forceFlush;                                                                                  \
    int speed;                                                                                       \
    int port;                                                                                        \
    float latency;                                                                                   \
    int maxComms;                                                                                    \
    int maxRecvs;                                                                                    \
    ncclNetDeviceType netDeviceType;                                                                 \
    int netDeviceVersion;                                                                            \
    vprops_t vProps;                                                                                 \
    size_t maxP2pBytes;                                                                              \
    size_t maxCollBytes;                                                                             \
    int maxMultiRequestSize /* requests one multi-request may hold; 1: none */

typedef struct {
    IBEX_NCCL_NET_V11_PROPERTIES(ncclNetVDeviceProps_v9_t);
} ncclNetProperties_v11_t;

#define NCCL_NET_MAX_DEVS_PER_NIC_V12 8
typedef struct {
    int ndevs;
    int devs[NCCL_NET_MAX_DEVS_PER_NIC_V12];
} ncclNetVDeviceProps_v12_t;

#define NCCL_NET_ID_UNDEF (-1)
typedef struct {
    IBEX_NCCL_NET_V11_PROPERTIES(ncclNetVDeviceProps_v12_t);
    int16_t railId; /* NCCL_NET_ID_UNDEF: not known */
    int16_t planeId;
} ncclNetProperties_v12_t;

/* NCCL's hints for a communicator's comms (setNetAttr, v11+); -1 / ~0u: undefined. */
typedef struct {
    int32_t maxConcurrentPeers;
    int32_t minConcurrentPeers;
    int32_t maxFlowsPerPeer;
    int32_t minFlowsPerPeer;
} ncclNetCommAttr_v11_t;

typedef struct {
    ncclNetCommAttr_v11_t sendCommAttr;
    ncclNetCommAttr_v11_t recvCommAttr;
    uint32_t op;    /* bit mask of collectives */
    uint32_t algo;  /* bit mask of NCCL algorithms */
    uint32_t proto; /* bit mask of NCCL protocols */
} ncclNetAttr_v11_t;

/* The call table of v11 and v12, which differ only in the properties and vNIC structs. */
#define IBEX_NCCL_NET_V11_TABLE(props_t, vprops_t)                                                   \
    const char *name;                                                                                \
    ncclResult_t (*init)(void **ctx, uint64_t comm_id, ncclNetCommConfig_v11_t *config,              \
                         ncclDebugLogger_t logger, ncclProfilerCallback_t profiler);                 \
    ncclResult_t (*devices)(int *ndev);                                                              \
    ncclResult_t (*getProperties)(int dev, props_t *props);                                          \
    ncclResult_t (*listen)(void *ctx, int dev, void *handle, void **listen_comm);                    \
    ncclResult_t (*connect)(void *ctx, int dev, void *handle, void **send_comm,                      \
                            ncclNetDeviceHandle_t **send_dev_comm);                                  \
    ncclResult_t (*accept)(void *listen_comm, void **recv_comm,                                      \
                           ncclNetDeviceHandle_t **recv_dev_comm);                                   \
    ncclResult_t (*regMr)(void *comm, void *data, size_t size, int type, void **mhandle);            \
    ncclResult_t (*regMrDmaBuf)(void *comm, void *data, size_t size, int type, uint64_t offset,      \
                                int fd, void **mhandle);                                             \
    ncclResult_t (*deregMr)(void *comm, void *mhandle);                                              \
    ncclResult_t (*isend)(void *send_comm, void *data, size_t size, int tag, void *mhandle,          \
                          void *profiler_handle, void **request);                                    \
    ncclResult_t (*irecv)(void *recv_comm, int n, void **data, size_t *sizes, int *tags,             \
                          void **mhandles, void **profiler_handles, void **request);                 \
    ncclResult_t (*iflush)(void *recv_comm, int n, void **data, int *sizes, void **mhandles,         \
                           void **request);                                                          \
    ncclResult_t (*test)(void *request, int *done, int *sizes);                                      \
    ncclResult_t (*closeSend)(void *send_comm);                                                      \
    ncclResult_t (*closeRecv)(void *recv_comm);                                                      \
    ncclResult_t (*closeListen)(void *listen_comm);                                                  \
    ncclResult_t (*getDeviceMr)(void *comm, void *mhandle, void **dptr_mhandle);                     \
    ncclResult_t (*irecvConsumed)(void *recv_comm, int n, void *request);                            \
    ncclResult_t (*makeVDevice)(int *d, vprops_t *props);                                            \
    ncclResult_t (*finalize)(void *ctx);                                                             \
    ncclResult_t (*setNetAttr)(void *ctx, ncclNetAttr_v11_t *attr)

typedef struct {
    IBEX_NCCL_NET_V11_TABLE(ncclNetProperties_v11_t, ncclNetVDeviceProps_v9_t);
} ncclNet_v11_t;

typedef struct {
    IBEX_NCCL_NET_V11_TABLE(ncclNetProperties_v12_t, ncclNetVDeviceProps_v12_t);
} ncclNet_v12_t;

#ifdef __cplusplus
}
#endif

#endif /* IBEX_NCCL_NET_ABI_H */
