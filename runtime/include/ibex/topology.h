/*
 * ibex — host topology and NIC binding.
 *
 * ibex_topo_load() discovers the machine with hwloc (PCI tree, NUMA nodes, cores, GPUs,
 * NICs with their RDMA device and netdev) or reads an hwloc XML file describing another
 * machine. Devices are numbered GPUs first (in PCI bus order, as CUDA_DEVICE_ORDER=
 * PCI_BUS_ID), then NICs (PCI bus order), then NUMA nodes (by OS index).
 *
 * Path types, as in `nvidia-smi topo -m`, best to worst:
 *   X     the device itself
 *   PIX   through at most one PCIe switch (or the same PCIe bridge)
 *   PXB   through several PCIe switches, without crossing a host bridge
 *   PHB   through a PCIe host bridge (same root complex, different root ports)
 *   NODE  between host bridges of the same NUMA node
 *   SYS   across the interconnect between NUMA nodes (or a NUMA locality is unknown)
 * Between a device and a NUMA node: PHB when the node is the device's own, else SYS.
 * Between two NUMA nodes: SYS.
 *
 * Environment (read by the calls named):
 *   IBEX_TOPO_FILE  ibex_topo_load(NULL): read this hwloc XML file instead of the machine.
 *   IBEX_NIC        ibex_topo_bind(): comma-separated NICs the binding may use; each is a
 *                   label ("NIC2"), RDMA device ("mlx5_2"), netdev ("enp12s0np0") or PCI
 *                   bus id ("0000:0c:00.0"). The usual policy then chooses among them.
 *                   A name that matches no NIC is an error, never silently ignored.
 *   IBEX_NUMA       ibex_topo_bind(): NUMA node (OS index) for the rank's memory and its
 *                   progress-thread cores, instead of the chosen NIC's node.
 *
 * Strings returned by these calls belong to the topology and live until ibex_topo_free().
 */
#ifndef IBEX_TOPOLOGY_H
#define IBEX_TOPOLOGY_H

#include <ibex/ibex.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ibex_topology ibex_topology_t;

typedef enum ibex_topo_kind {
    IBEX_TOPO_GPU = 0,
    IBEX_TOPO_NIC = 1,  /* a PCI network function with a netdev and/or an RDMA device */
    IBEX_TOPO_NUMA = 2, /* a NUMA node */
} ibex_topo_kind_t;

typedef enum ibex_path_type {
    IBEX_PATH_NONE = -1, /* no path to speak of (binding without a GPU or core anchor) */
    IBEX_PATH_X = 0,
    IBEX_PATH_PIX = 1,
    IBEX_PATH_PXB = 2,
    IBEX_PATH_PHB = 3,
    IBEX_PATH_NODE = 4,
    IBEX_PATH_SYS = 5,
} ibex_path_type_t;

/* "X", "PIX", ..., "SYS"; "-" for IBEX_PATH_NONE. Never NULL. */
IBEX_API const char *ibex_path_type_str(ibex_path_type_t type);

/* xml_path NULL: the file named by IBEX_TOPO_FILE if set, else this machine.
 * IBEX_ERR_NO_DEVICE when the file cannot be opened, IBEX_ERR_INVALID_ARGUMENT when hwloc
 * cannot parse it; ibex_last_error() names the file and the reason. */
IBEX_API ibex_status_t ibex_topo_load(const char *xml_path, ibex_topology_t **topo);
IBEX_API void ibex_topo_free(ibex_topology_t *topo);
/* Writes the topology as hwloc XML (a fixture of this machine for tests, or for
 * IBEX_TOPO_FILE on another host). */
IBEX_API ibex_status_t ibex_topo_export_xml(const ibex_topology_t *topo, const char *path);
/* The XML file it was read from, or "" for this machine. */
IBEX_API const char *ibex_topo_source(const ibex_topology_t *topo);
/* The HostName recorded by hwloc ("" if none). */
IBEX_API const char *ibex_topo_hostname(const ibex_topology_t *topo);

/* Number of devices of every kind (-1 for a NULL topology). */
IBEX_API int ibex_topo_device_count(const ibex_topology_t *topo);
/* Number of devices of one kind. */
IBEX_API int ibex_topo_count(const ibex_topology_t *topo, ibex_topo_kind_t kind);
/* Device index of the ordinal-th device of a kind (GPU 3 -> its index). */
IBEX_API ibex_status_t ibex_topo_index(const ibex_topology_t *topo, ibex_topo_kind_t kind, int ordinal,
                                       int *index);
/* Device by label ("GPU0", "NIC1", "NUMA0"), GPU OS name ("cuda0", "nvml0"), RDMA device,
 * netdev or PCI bus id. IBEX_ERR_NO_DEVICE if none matches. */
IBEX_API ibex_status_t ibex_topo_find(const ibex_topology_t *topo, const char *name, int *index);

typedef struct ibex_topo_device {
    uint32_t size; /* set by the caller to sizeof(ibex_topo_device_t) */
    uint32_t reserved;
    ibex_topo_kind_t kind;
    int32_t ordinal;         /* position among devices of its kind: GPU2 -> 2 */
    const char *label;       /* "GPU0", "NIC3", "NUMA1" */
    const char *name;        /* NIC: RDMA device, else netdev; GPU: "cuda0"/"nvml0"/bus id */
    const char *pci_busid;   /* "0000:07:00.0"; "" for NUMA nodes */
    const char *model;       /* "NVIDIA A100-SXM4-80GB", "MT28908 Family [ConnectX-6]", "" */
    const char *rdma_device; /* NIC: "mlx5_0", or "" when the function has no RDMA device */
    const char *netdev;      /* NIC: its network interface, or "" */
    const char *cpus;        /* local CPUs as a list, "0-7,16-23" (all CPUs when unknown) */
    const char *numa_nodes;  /* local NUMA nodes as a list, "0"; "N/A" when unknown */
    int32_t numa_node;       /* the local node (for a NUMA node: its OS index) when it is
                              * exactly one; -1: unknown or several.
                              * sysfs numa_node -1 lands here as -1, never as node 0. */
    int32_t link_width;      /* PCIe lanes; 0 when not known */
    double link_speed_gbs;   /* PCIe link bandwidth in GB/s as hwloc reports it; 0 unknown */
} ibex_topo_device_t;

IBEX_API ibex_status_t ibex_topo_device(const ibex_topology_t *topo, int index, ibex_topo_device_t *info);

/* Path type between two device indices (i == j gives IBEX_PATH_X). */
IBEX_API ibex_status_t ibex_topo_path(const ibex_topology_t *topo, int i, int j, ibex_path_type_t *type);

/* ------------------------------------------------------------------ binding */

#define IBEX_MAGIC_BIND_REQUEST 0x49425842u /* IBXB */

#define IBEX_BIND_GPU_NONE (-1)      /* the rank uses no GPU */
#define IBEX_BIND_GPU_FROM_RANK (-2) /* GPU local_rank % GPU count, when there are GPUs */
#define IBEX_BIND_MAX_NICS 8
#define IBEX_CPULIST_LEN 512

typedef struct ibex_bind_request {
    uint32_t size;
    uint32_t magic; /* IBEX_MAGIC_BIND_REQUEST */
    uint32_t version;
    int32_t local_rank; /* 0 .. local_size-1 */
    int32_t local_size; /* ranks on this host */
    int32_t gpu;        /* GPU ordinal, IBEX_BIND_GPU_NONE or IBEX_BIND_GPU_FROM_RANK */
    const char *cpus;   /* cores the rank computes on ("0-7"), NULL if not pinned; used as
                         * the anchor when there is no GPU, and kept free of progress threads */
    int32_t max_nics;      /* NICs wanted, 1 .. IBEX_BIND_MAX_NICS */
    int32_t progress_cpus; /* cores for the progress thread(s), >= 1 */
} ibex_bind_request_t;

#define IBEX_BIND_REQUEST_INIT                                                                  \
    {sizeof(ibex_bind_request_t), IBEX_MAGIC_BIND_REQUEST, IBEX_ATTR_VERSION, 0, 1,               \
     IBEX_BIND_GPU_FROM_RANK, NULL, 1, 1}

enum ibex_binding_flags {
    IBEX_BINDING_NIC_FROM_ENV = 1,  /* IBEX_NIC restricted the choice */
    IBEX_BINDING_NUMA_FROM_ENV = 2, /* IBEX_NUMA chose the node */
};

typedef struct ibex_binding {
    uint32_t size; /* set by the caller to sizeof(ibex_binding_t) */
    uint32_t flags; /* ibex_binding_flags */
    int32_t gpu;    /* GPU ordinal the binding was made for; -1 none */
    int32_t nic_count;
    int32_t nics[IBEX_BIND_MAX_NICS]; /* device indices; nics[0] is the rank's own rail */
    ibex_path_type_t path;            /* from the GPU (or the cores) to nics[0] */
    int32_t numa_node;                /* node for the rank's buffers; -1: no preference */
    int32_t slot;                     /* rank's position among ranks sharing its NIC's cores */
    char progress_cpus[IBEX_CPULIST_LEN]; /* where to run the progress thread, "15" */
    char nic_cpus[IBEX_CPULIST_LEN];      /* the pool it came from: the NIC's local CPUs */
} ibex_binding_t;

/* Chooses the NIC(s), NUMA node and progress-thread cores of one local rank:
 *  - NICs: RDMA-capable ones if the host has any, else plain network functions; narrowed
 *    by IBEX_NIC. With a GPU, the NICs at the best path type from it; GPUs that share the
 *    same set of best NICs are spread over it in GPU order (rail alignment). With cores
 *    only, the NICs local to those cores; ranks spread over them by local_rank.
 *  - NUMA node: IBEX_NUMA, else the NIC's node, else the GPU's, else -1 (unknown).
 *  - progress cores: one hardware thread per core from the NIC's local CPUs (the node's
 *    with IBEX_NUMA), taken from the top down by slot so ranks sharing them differ, and
 *    avoiding req->cpus where possible.
 * req may be NULL (defaults). The choice is logged at info level. */
IBEX_API ibex_status_t ibex_topo_bind(const ibex_topology_t *topo, const ibex_bind_request_t *req,
                                      ibex_binding_t *binding);

/* ------------------------------------------------------------------ NUMA memory */

/* Page-aligned memory for registered buffers, placed on `node` with libnuma (node -1: no
 * preference). When libnuma reports NUMA unsupported (numa_available() < 0), plain
 * anonymous memory is returned and the fallback logged once. Free with ibex_numa_free(). */
IBEX_API ibex_status_t ibex_numa_alloc(size_t size, int node, void **ptr);
IBEX_API void ibex_numa_free(void *ptr, size_t size);

#ifdef __cplusplus
}
#endif

#endif /* IBEX_TOPOLOGY_H */
