/*
 * ibex — kernel-bypass RDMA runtime: the public C API.
 *
 * Verbs-shaped object model: device list -> context -> protection domain -> memory
 * regions, completion queues and reliable-connection queue pairs. Every call returns an
 * ibex_status_t; on failure a per-thread detail string is available from
 * ibex_last_error(). Handles are opaque. Structures passed in start with a size field
 * (and, for attribute structures, a magic and a version) so the API can grow without
 * breaking callers: initialise them with the matching IBEX_*_INIT macro.
 */
#ifndef IBEX_IBEX_H
#define IBEX_IBEX_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(IBEX_BUILDING_LIBRARY)
#define IBEX_API __attribute__((visibility("default")))
#else
#define IBEX_API
#endif

#define IBEX_VERSION_MAJOR 0
#define IBEX_VERSION_MINOR 10
#define IBEX_VERSION_PATCH 0
#define IBEX_VERSION_CODE(major, minor, patch) (((major) * 10000) + ((minor) * 100) + (patch))
#define IBEX_VERSION IBEX_VERSION_CODE(IBEX_VERSION_MAJOR, IBEX_VERSION_MINOR, IBEX_VERSION_PATCH)

/* Version of the library actually loaded (IBEX_VERSION is the one compiled against). */
IBEX_API int ibex_version(void);
IBEX_API const char *ibex_version_string(void);

/* ------------------------------------------------------------------ status */

typedef enum ibex_status {
    IBEX_OK = 0,
    IBEX_ERR_INVALID_ARGUMENT = 1, /* null handle, bad value, bad struct size/magic */
    IBEX_ERR_NOT_SUPPORTED = 2,    /* the provider does not implement this */
    IBEX_ERR_NO_DEVICE = 3,        /* no such device, or no provider claims it */
    IBEX_ERR_NO_MEMORY = 4,
    IBEX_ERR_INVALID_STATE = 5,    /* wrong QP state, object still in use, ... */
    IBEX_ERR_QUEUE_FULL = 6,       /* send/receive queue or CQ has no room */
    IBEX_ERR_SYSTEM = 7,           /* an OS call failed; the detail names it and errno */
    IBEX_ERR_TIMEOUT = 8,
    IBEX_ERR_REMOTE = 9,           /* the peer failed or went away */
    IBEX_ERR_ADDRESS_IN_USE = 10,
    IBEX_ERR_INTERNAL = 11,
} ibex_status_t;

/* Short fixed description of a status ("invalid argument", ...). Never NULL. */
IBEX_API const char *ibex_strerror(ibex_status_t status);
/* Detail of the last failure on the calling thread ("" if none). Valid until the next
 * ibex call on this thread. */
IBEX_API const char *ibex_last_error(void);

/* ------------------------------------------------------------------ handles */

typedef struct ibex_device_list ibex_device_list_t;
typedef struct ibex_context ibex_context_t;
typedef struct ibex_pd ibex_pd_t;
typedef struct ibex_mr ibex_mr_t;
typedef struct ibex_cq ibex_cq_t;
typedef struct ibex_qp ibex_qp_t;

/* Structure magic: "IBX" + a letter per structure kind. */
#define IBEX_MAGIC_CONTEXT_ATTR 0x49425843u /* IBXC */
#define IBEX_MAGIC_QP_INIT_ATTR 0x49425849u /* IBXI */
#define IBEX_MAGIC_QP_ATTR 0x49425851u      /* IBXQ */
#define IBEX_MAGIC_FAULTS 0x49425846u       /* IBXF */
#define IBEX_ATTR_VERSION 1u

/* ------------------------------------------------------------------ devices */

/* Lists the devices every built provider can open: "udp:lo" and one "udp:<ifname>" per
 * IPv4 interface for the soft provider, RDMA devices for verbs (when built). */
IBEX_API ibex_status_t ibex_get_device_list(ibex_device_list_t **list, int *count);
IBEX_API const char *ibex_device_name(const ibex_device_list_t *list, int index);
IBEX_API const char *ibex_device_provider(const ibex_device_list_t *list, int index);
IBEX_API void ibex_free_device_list(ibex_device_list_t *list);

/* ------------------------------------------------------------------ context */

typedef struct ibex_fault_config {
    uint32_t size;
    uint32_t magic; /* IBEX_MAGIC_FAULTS */
    uint32_t version;
    uint32_t reserved;
    /* Probabilities in [0, 1], applied to every packet this context transmits. */
    double loss;
    double reorder;   /* packet held back and sent after the next one */
    double duplicate; /* packet sent twice */
    double corrupt;   /* one byte flipped after the ICRC is computed */
    uint64_t seed;    /* 0: derived from the clock and pid */
} ibex_fault_config_t;

#define IBEX_FAULT_CONFIG_INIT                                                                  \
    {sizeof(ibex_fault_config_t), IBEX_MAGIC_FAULTS, IBEX_ATTR_VERSION, 0, 0.0, 0.0, 0.0, 0.0, 0}

typedef struct ibex_context_attr {
    uint32_t size;
    uint32_t magic; /* IBEX_MAGIC_CONTEXT_ATTR */
    uint32_t version;
    /* Soft provider, udp port: local IPv4 address (NULL: from the device name or
     * IBEX_UDP_ADDR; on loopback the first free 127.0.0.x) and UDP port (0: 4791). */
    const char *local_addr;
    uint16_t udp_port;
    uint16_t reserved0;
    /* Run a progress thread (1, default) or progress only inside ibex calls (0). */
    int32_t progress_thread;
    /* CPUs for the progress thread as a cpulist ("2,3"). NULL: IBEX_PROGRESS_CPUS, else
     * the CPUs local to the device's NIC when the topology knows it, else unpinned. */
    const char *progress_cpus;
    /* Soft provider: congestion control, "off", "paper" or "mlx5" (DCQCN with that
     * preset; see congestion/README.md). NULL: IBEX_DCQCN, else off. Knobs are
     * overridden by IBEX_DCQCN_<knob> (e.g. IBEX_DCQCN_rpg_ai_rate=20). */
    const char *dcqcn;
    /* DCQCN line rate in Mbit/s: where every QP starts and what it recovers to. 0:
     * IBEX_DCQCN_LINE_RATE, else 10000. */
    uint32_t dcqcn_line_rate_mbps;
    uint32_t reserved1;
} ibex_context_attr_t;

#define IBEX_CONTEXT_ATTR_INIT                                                                  \
    {sizeof(ibex_context_attr_t), IBEX_MAGIC_CONTEXT_ATTR, IBEX_ATTR_VERSION, NULL, 0, 0, 1, NULL, NULL, 0, 0}

/* attr may be NULL (defaults). device: a name from the list, e.g. "udp:lo". */
IBEX_API ibex_status_t ibex_open_device(const char *device, const ibex_context_attr_t *attr,
                                        ibex_context_t **context);
IBEX_API ibex_status_t ibex_close_device(ibex_context_t *context);
IBEX_API const char *ibex_context_device_name(const ibex_context_t *context);
IBEX_API ibex_status_t ibex_set_faults(ibex_context_t *context, const ibex_fault_config_t *faults);

/* Context-wide counters; names follow the NIC's hw_counters where one exists. */
typedef struct ibex_counters {
    uint32_t size; /* set by the caller to sizeof(ibex_counters_t) */
    uint32_t reserved;
    uint64_t tx_packets;
    uint64_t tx_bytes;
    uint64_t rx_packets;
    uint64_t rx_bytes;
    uint64_t rx_dropped_malformed; /* bad headers, unknown opcode, truncated */
    uint64_t rx_icrc_errors;
    uint64_t rx_unknown_qp;
    uint64_t np_ecn_marked_roce_packets; /* CE-marked packets received */
    uint64_t np_cnp_sent;
    uint64_t rp_cnp_handled;
    uint64_t out_of_sequence;       /* packets dropped for a PSN beyond the expected one */
    uint64_t packet_seq_err;        /* PSN-sequence NAKs received */
    uint64_t duplicate_request;     /* duplicate PSNs seen by the responder */
    uint64_t local_ack_timeout_err; /* retransmission timeouts */
    uint64_t retransmitted_packets;
    uint64_t rnr_nak_sent;
    uint64_t rnr_nak_received;
    uint64_t remote_access_errors;  /* access NAKs sent by this responder */
    uint64_t faults_injected;
    /* Since 0.3 (loss recovery, see ibex_query_qp_retransmit): */
    uint64_t seq_naks_sent;    /* PSN-sequence NAKs sent by this responder (selective ones too) */
    uint64_t tail_timeouts;    /* RTO_low firings (selective mode) */
    uint64_t ooo_packets_held; /* requests held past a hole (selective mode) */
    /* Since 0.4 (udp port segmentation offload): */
    uint64_t tx_gso_trains; /* sends of two or more packets as one UDP GSO datagram */
    uint64_t rx_gro_trains; /* received datagrams that held two or more packets (UDP GRO) */
} ibex_counters_t;

IBEX_API ibex_status_t ibex_query_counters(ibex_context_t *context, ibex_counters_t *counters);

/* What a device offers (since 0.7), as ibv_query_device and ibv_query_port tell a verbs
 * user. Fields a newer library adds go at the end; the caller's size says how many it
 * knows, and only those are written. */
typedef struct ibex_device_attr {
    uint32_t size; /* set by the caller to sizeof(ibex_device_attr_t) */
    uint32_t reserved;
    uint64_t max_msg_size; /* longest message one work request may carry, in bytes */
    uint32_t max_mtu;      /* ibex_mtu_t: the largest path MTU this device's link carries */
    uint32_t reserved2;
    /* The message length from which the device's own costs per message (headers sent
     * alone, acknowledgements, completions, trips through a kernel) stay a small share of
     * the message's time: split long transfers into pieces no shorter than this. The
     * collectives cut their slices to at least this length. */
    uint64_t efficient_msg_bytes;
} ibex_device_attr_t;

IBEX_API ibex_status_t ibex_query_device(ibex_context_t *context, ibex_device_attr_t *attr);

/* Drives the progress engine once from the calling thread (receive, timers, transmit).
 * Useful with progress_thread = 0, or while spinning on memory written by a peer. */
IBEX_API ibex_status_t ibex_progress(ibex_context_t *context);

/* ------------------------------------------------------------------ memory */

typedef enum ibex_access_flags {
    IBEX_ACCESS_LOCAL_WRITE = 1,
    IBEX_ACCESS_REMOTE_WRITE = 2,
    IBEX_ACCESS_REMOTE_READ = 4,
    IBEX_ACCESS_REMOTE_ATOMIC = 8,
} ibex_access_flags_t;

IBEX_API ibex_status_t ibex_alloc_pd(ibex_context_t *context, ibex_pd_t **pd);
IBEX_API ibex_status_t ibex_dealloc_pd(ibex_pd_t *pd);

IBEX_API ibex_status_t ibex_reg_mr(ibex_pd_t *pd, void *addr, size_t length, unsigned access,
                                   ibex_mr_t **mr);
IBEX_API ibex_status_t ibex_dereg_mr(ibex_mr_t *mr);

/* Memory for buffers that peers will access (since 0.3). On the shm device it is
 * memfd-backed and shared with same-host peers on first use, so a WRITE or READ that
 * uses it moves as one memcpy between the two mappings; on other devices it is ordinary
 * page-aligned memory. Either way register it with ibex_reg_mr like any memory, and
 * release it with ibex_mem_free on the same PD (after ibex_dereg_mr). size > 0. */
IBEX_API ibex_status_t ibex_mem_alloc(ibex_pd_t *pd, size_t size, void **ptr);
IBEX_API ibex_status_t ibex_mem_free(ibex_pd_t *pd, void *ptr);

/* A pointer in this process to a peer's registered memory [remote_addr, remote_addr +
 * length) under rkey, where the device maps that memory here (since 0.5; UCX calls this
 * rkey_ptr). On the shm device: memory the peer took from ibex_mem_alloc, reached over qp
 * in RTR or RTS. Loads and stores through the pointer are plain memory accesses, with no
 * work request and no completion; they are ordered with the QP's WRITEs only as the CPU
 * orders memory. `access`: IBEX_ACCESS_REMOTE_READ and/or IBEX_ACCESS_REMOTE_WRITE, which
 * the region must grant. Valid while the QP exists and the peer keeps the region
 * registered (a peer that exits leaves its pages readable, never a fault).
 * IBEX_ERR_NOT_SUPPORTED: this device maps no peer memory, or not this region (memory
 * not from ibex_mem_alloc); IBEX_ERR_INVALID_ARGUMENT: a key, range or right the region
 * refuses; IBEX_ERR_INVALID_STATE: the QP is not connected. */
IBEX_API ibex_status_t ibex_rkey_ptr(ibex_qp_t *qp, uint64_t remote_addr, uint32_t rkey, size_t length,
                                     unsigned access, void **ptr);

typedef struct ibex_mr_info {
    void *addr;
    size_t length;
    uint32_t lkey;
    uint32_t rkey;
    unsigned access;
} ibex_mr_info_t;

IBEX_API ibex_status_t ibex_mr_query(const ibex_mr_t *mr, ibex_mr_info_t *info);
IBEX_API uint32_t ibex_mr_lkey(const ibex_mr_t *mr);
IBEX_API uint32_t ibex_mr_rkey(const ibex_mr_t *mr);

/* ------------------------------------------------------------------ completions */

/* Values equal to ibv_wc_status, so a verbs status passes through unchanged. */
typedef enum ibex_wc_status {
    IBEX_WC_SUCCESS = 0,
    IBEX_WC_LOC_LEN_ERR = 1,
    IBEX_WC_LOC_QP_OP_ERR = 2,
    IBEX_WC_LOC_EEC_OP_ERR = 3,
    IBEX_WC_LOC_PROT_ERR = 4,
    IBEX_WC_WR_FLUSH_ERR = 5,
    IBEX_WC_MW_BIND_ERR = 6,
    IBEX_WC_BAD_RESP_ERR = 7,
    IBEX_WC_LOC_ACCESS_ERR = 8,
    IBEX_WC_REM_INV_REQ_ERR = 9,
    IBEX_WC_REM_ACCESS_ERR = 10,
    IBEX_WC_REM_OP_ERR = 11,
    IBEX_WC_RETRY_EXC_ERR = 12,
    IBEX_WC_RNR_RETRY_EXC_ERR = 13,
    IBEX_WC_LOC_RDD_VIOL_ERR = 14,
    IBEX_WC_REM_INV_RD_REQ_ERR = 15,
    IBEX_WC_REM_ABORT_ERR = 16,
    IBEX_WC_INV_EECN_ERR = 17,
    IBEX_WC_INV_EEC_STATE_ERR = 18,
    IBEX_WC_FATAL_ERR = 19,
    IBEX_WC_RESP_TIMEOUT_ERR = 20,
    IBEX_WC_GENERAL_ERR = 21,
} ibex_wc_status_t;

/* "IBV_WC_SUCCESS"-style name of a completion status. */
IBEX_API const char *ibex_wc_status_str(ibex_wc_status_t status);

/* Values equal to ibv_wc_opcode. */
typedef enum ibex_wc_opcode {
    IBEX_WC_SEND = 0,
    IBEX_WC_RDMA_WRITE = 1,
    IBEX_WC_RDMA_READ = 2,
    IBEX_WC_COMP_SWAP = 3,
    IBEX_WC_FETCH_ADD = 4,
    IBEX_WC_RECV = 128,
    IBEX_WC_RECV_RDMA_WITH_IMM = 129,
} ibex_wc_opcode_t;

enum { IBEX_WC_WITH_IMM = 2 }; /* wc_flags bit, as IBV_WC_WITH_IMM */

typedef struct ibex_wc {
    uint64_t wr_id;
    ibex_wc_status_t status;
    ibex_wc_opcode_t opcode;
    uint32_t vendor_err;
    uint32_t byte_len;
    uint32_t imm_data; /* host order */
    uint32_t qp_num;
    uint32_t src_qp;
    unsigned wc_flags;
} ibex_wc_t;

IBEX_API ibex_status_t ibex_create_cq(ibex_context_t *context, int cqe, ibex_cq_t **cq);
IBEX_API ibex_status_t ibex_destroy_cq(ibex_cq_t *cq);
/* Takes up to max completions; *count receives how many (0 when empty). */
IBEX_API ibex_status_t ibex_poll_cq(ibex_cq_t *cq, int max, ibex_wc_t *wc, int *count);
/* A file descriptor that becomes readable when a completion arrives after
 * ibex_req_notify_cq(); for epoll/poll. Owned by the CQ. */
IBEX_API ibex_status_t ibex_cq_fd(ibex_cq_t *cq, int *fd);
IBEX_API ibex_status_t ibex_req_notify_cq(ibex_cq_t *cq);
/* Blocks until the CQ has a completion or timeout_ms passes (-1: no limit);
 * IBEX_ERR_TIMEOUT when nothing came. Consumes the fd's event. */
IBEX_API ibex_status_t ibex_cq_wait(ibex_cq_t *cq, int timeout_ms);

/* ------------------------------------------------------------------ queue pairs */

typedef enum ibex_qp_state {
    IBEX_QPS_RESET = 0,
    IBEX_QPS_INIT = 1,
    IBEX_QPS_RTR = 2,
    IBEX_QPS_RTS = 3,
    IBEX_QPS_SQD = 4,
    IBEX_QPS_SQE = 5,
    IBEX_QPS_ERR = 6,
} ibex_qp_state_t;

typedef enum ibex_mtu {
    IBEX_MTU_256 = 1,
    IBEX_MTU_512 = 2,
    IBEX_MTU_1024 = 3,
    IBEX_MTU_2048 = 4,
    IBEX_MTU_4096 = 5,
} ibex_mtu_t;

IBEX_API int ibex_mtu_to_bytes(ibex_mtu_t mtu); /* 0 for an invalid value */

/* Everything a peer needs to connect to a QP. Serialises to IBEX_EP_ADDR_WIRE_LEN bytes
 * (network order) or to a printable string of at most IBEX_EP_ADDR_STR_LEN bytes. */
typedef struct ibex_ep_addr {
    uint8_t gid[16];  /* IPv4 as ::ffff:a.b.c.d, or an IPv6 address / RoCE GID */
    uint16_t udp_port; /* soft provider: the peer's UDP port (4791 normally) */
    uint8_t mtu;      /* ibex_mtu_t */
    uint8_t flags;
    uint32_t qpn;     /* 24 bits */
    uint32_t psn;     /* 24 bits: the first PSN this QP sends */
} ibex_ep_addr_t;

#define IBEX_EP_ADDR_WIRE_LEN 28
#define IBEX_EP_ADDR_STR_LEN 96

IBEX_API ibex_status_t ibex_ep_addr_pack(const ibex_ep_addr_t *addr, uint8_t *buf, size_t len);
IBEX_API ibex_status_t ibex_ep_addr_unpack(const uint8_t *buf, size_t len, ibex_ep_addr_t *addr);
/* "ibex1:<address>:<udp port>:<qpn hex>:<psn hex>:<mtu bytes>" */
IBEX_API ibex_status_t ibex_ep_addr_to_string(const ibex_ep_addr_t *addr, char *buf, size_t len);
IBEX_API ibex_status_t ibex_ep_addr_from_string(const char *str, ibex_ep_addr_t *addr);

typedef struct ibex_qp_init_attr {
    uint32_t size;
    uint32_t magic; /* IBEX_MAGIC_QP_INIT_ATTR */
    uint32_t version;
    uint32_t reserved;
    ibex_cq_t *send_cq;
    ibex_cq_t *recv_cq;
    uint32_t max_send_wr;  /* default 1024 */
    uint32_t max_recv_wr;  /* default 1024 */
    uint32_t max_send_sge; /* default 16 */
    uint32_t max_recv_sge; /* default 16 */
    int32_t sq_sig_all;    /* 1: every send WR completes as if signaled */
} ibex_qp_init_attr_t;

#define IBEX_QP_INIT_ATTR_INIT                                                                  \
    {sizeof(ibex_qp_init_attr_t), IBEX_MAGIC_QP_INIT_ATTR, IBEX_ATTR_VERSION, 0, NULL, NULL, 0, 0, 0, 0, 0}

typedef enum ibex_qp_attr_mask {
    IBEX_QP_STATE = 1 << 0,
    IBEX_QP_ACCESS_FLAGS = 1 << 1,
    IBEX_QP_PATH_MTU = 1 << 2,
    IBEX_QP_DEST = 1 << 3,      /* remote ep address: GID, UDP port, QPN */
    IBEX_QP_RQ_PSN = 1 << 4,
    IBEX_QP_SQ_PSN = 1 << 5,
    IBEX_QP_TIMEOUT = 1 << 6,
    IBEX_QP_RETRY_CNT = 1 << 7,
    IBEX_QP_RNR_RETRY = 1 << 8,
    IBEX_QP_MIN_RNR_TIMER = 1 << 9,
    IBEX_QP_MAX_RD_ATOMIC = 1 << 10,
    IBEX_QP_TRAFFIC_CLASS = 1 << 11,
    IBEX_QP_SL = 1 << 12,       /* since 0.8 */
} ibex_qp_attr_mask_t;

typedef struct ibex_qp_attr {
    uint32_t size;
    uint32_t magic; /* IBEX_MAGIC_QP_ATTR */
    uint32_t version;
    ibex_qp_state_t qp_state;
    unsigned qp_access_flags; /* remote access allowed on this QP (ibex_access_flags_t) */
    ibex_mtu_t path_mtu;
    ibex_ep_addr_t dest;      /* with IBEX_QP_DEST */
    uint32_t rq_psn;          /* first PSN expected from the peer */
    uint32_t sq_psn;          /* first PSN sent */
    uint8_t timeout;          /* 4.096 us * 2^timeout; 0 = infinite; default 14 */
    uint8_t retry_cnt;        /* 0..7, default 7 */
    uint8_t rnr_retry;        /* 0..7, 7 = infinite; default 7 */
    uint8_t min_rnr_timer;    /* IB RNR timer code 0..31, default 12 (0.64 ms) */
    uint8_t max_rd_atomic;
    uint8_t traffic_class;    /* DSCP << 2; the ECN bits are ibex's */
    uint8_t sl;               /* service level 0..7: the VLAN priority (PCP) of the QP's frames */
    uint8_t reserved;
    uint32_t qp_num;          /* query only */
} ibex_qp_attr_t;

#define IBEX_QP_ATTR_INIT {sizeof(ibex_qp_attr_t), IBEX_MAGIC_QP_ATTR, IBEX_ATTR_VERSION}

IBEX_API ibex_status_t ibex_create_qp(ibex_pd_t *pd, const ibex_qp_init_attr_t *attr, ibex_qp_t **qp);
IBEX_API ibex_status_t ibex_destroy_qp(ibex_qp_t *qp);
/* Each transition takes the attributes verbs takes there, and every provider refuses the
 * others (INVALID_ARGUMENT, naming them), so a program that runs on the software providers
 * runs on an RNIC:
 *   RESET -> INIT, INIT -> INIT  access flags; traffic class and sl (kept for RTR)
 *   INIT -> RTR   the peer (IBEX_QP_DEST, required), path MTU, rq_psn, responder resources
 *                 (max_rd_atomic), min_rnr_timer, access flags, traffic class, sl
 *   RTR -> RTS    sq_psn, timeout, retry_cnt, rnr_retry, initiator depth (max_rd_atomic),
 *                 min_rnr_timer, access flags
 *   RTS -> RTS    access flags, min_rnr_timer
 *   -> RESET, -> ERR  the state alone
 * ibex_qp_connect_attr places each attribute at its transition for you. */
IBEX_API ibex_status_t ibex_modify_qp(ibex_qp_t *qp, const ibex_qp_attr_t *attr, unsigned attr_mask);
IBEX_API ibex_status_t ibex_query_qp(ibex_qp_t *qp, ibex_qp_attr_t *attr);
IBEX_API uint32_t ibex_qp_num(const ibex_qp_t *qp);
/* The address a peer passes in IBEX_QP_DEST to reach this QP (psn = the initial SQ PSN). */
IBEX_API ibex_status_t ibex_qp_local_addr(ibex_qp_t *qp, ibex_ep_addr_t *addr);

/* Convenience: RESET -> INIT -> RTR -> RTS towards remote with sensible defaults
 * (access = remote write/read/atomic, MTU = min of both, timeout 14, retry 7, rnr 7). */
IBEX_API ibex_status_t ibex_qp_connect(ibex_qp_t *qp, const ibex_ep_addr_t *remote);
/* ibex_qp_connect with the attributes of attr_mask taken from attr instead of the defaults,
 * each applied at the transition that takes it: IBEX_QP_ACCESS_FLAGS, PATH_MTU (at most
 * what both sides carry), TIMEOUT, RETRY_CNT, RNR_RETRY, MIN_RNR_TIMER, MAX_RD_ATOMIC
 * (both the responder resources and the initiator depth; a provider caps it at what its
 * device serves), TRAFFIC_CLASS and SL. The state, the peer and the PSNs come from the
 * addresses; naming them is INVALID_ARGUMENT. attr may be NULL when attr_mask is 0. (0.8) */
IBEX_API ibex_status_t ibex_qp_connect_attr(ibex_qp_t *qp, const ibex_ep_addr_t *remote, const ibex_qp_attr_t *attr,
                                            unsigned attr_mask);

/* ------------------------------------------------------------------ work requests */

typedef struct ibex_sge {
    uint64_t addr;
    uint32_t length;
    uint32_t lkey;
} ibex_sge_t;

typedef enum ibex_wr_opcode {
    IBEX_WR_RDMA_WRITE = 0,
    IBEX_WR_RDMA_WRITE_WITH_IMM = 1,
    IBEX_WR_SEND = 2,
    IBEX_WR_SEND_WITH_IMM = 3,
    IBEX_WR_RDMA_READ = 4,
    IBEX_WR_ATOMIC_CMP_AND_SWP = 5,
    IBEX_WR_ATOMIC_FETCH_AND_ADD = 6,
} ibex_wr_opcode_t; /* values equal to ibv_wr_opcode */

enum ibex_send_flags {
    IBEX_SEND_FENCE = 1,
    IBEX_SEND_SIGNALED = 2,
    IBEX_SEND_SOLICITED = 4,
    IBEX_SEND_INLINE = 8,
};

typedef struct ibex_send_wr {
    uint64_t wr_id;
    struct ibex_send_wr *next;
    ibex_sge_t *sg_list;
    int num_sge;
    ibex_wr_opcode_t opcode;
    unsigned send_flags;
    uint32_t imm_data; /* host order */
    union {
        struct {
            uint64_t remote_addr;
            uint32_t rkey;
        } rdma;
        struct {
            uint64_t remote_addr;
            uint64_t compare_add; /* compare for CMP_AND_SWP, addend for FETCH_AND_ADD */
            uint64_t swap;
            uint32_t rkey;
        } atomic;
    } wr;
} ibex_send_wr_t;

typedef struct ibex_recv_wr {
    uint64_t wr_id;
    struct ibex_recv_wr *next;
    ibex_sge_t *sg_list;
    int num_sge;
} ibex_recv_wr_t;

/* On failure *bad_wr (if given) points at the first WR not posted. */
IBEX_API ibex_status_t ibex_post_send(ibex_qp_t *qp, ibex_send_wr_t *wr, ibex_send_wr_t **bad_wr);
IBEX_API ibex_status_t ibex_post_recv(ibex_qp_t *qp, ibex_recv_wr_t *wr, ibex_recv_wr_t **bad_wr);

/* ------------------------------------------------------------------ congestion control (DCQCN) */

/* One QP's congestion-control state. Context-wide totals are in ibex_counters_t
 * (np_ecn_marked_roce_packets, np_cnp_sent, rp_cnp_handled). */
typedef struct ibex_qp_cc {
    uint32_t size;    /* set by the caller to sizeof(ibex_qp_cc_t) */
    uint32_t enabled; /* 1 when DCQCN runs on this QP; 0: everything below is 0 */
    double rate_mbps;        /* current rate Rc the QP is paced at, Mbit/s */
    double target_rate_mbps; /* target rate Rt, Mbit/s */
    double alpha;            /* congestion estimate, 0..1 */
    uint64_t rp_cnp_handled; /* CNPs this QP reacted to (reaction point) */
    uint64_t np_cnp_sent;    /* CNPs this QP sent for CE-marked packets (notification point) */
    uint64_t np_ecn_marked_roce_packets; /* CE-marked packets received for this QP */
    uint32_t rate_timer_stage;   /* rate-increase timer events since the last CNP */
    uint32_t byte_counter_stage; /* byte-counter events since the last CNP */
} ibex_qp_cc_t;

/* IBEX_ERR_NOT_SUPPORTED where the provider has no software congestion control (verbs:
 * the NIC runs DCQCN; read its counters with ibex_query_counters). */
IBEX_API ibex_status_t ibex_query_qp_cc(ibex_qp_t *qp, ibex_qp_cc_t *cc);

/* ------------------------------------------------------------------ loss recovery */

/* How a soft QP recovers lost packets (IBEX_RETRANSMIT, read when the context opens). */
typedef enum ibex_retransmit_mode {
    IBEX_RETRANSMIT_GBN = 0,       /* go-back-N, as RNICs do (default) */
    IBEX_RETRANSMIT_SELECTIVE = 1, /* IRN-style selective retransmission */
} ibex_retransmit_mode_t;

/* One QP's retransmission counters. Context-wide totals are in ibex_counters_t
 * (local_ack_timeout_err, tail_timeouts, seq_naks_sent, packet_seq_err,
 * retransmitted_packets, ooo_packets_held). */
typedef struct ibex_qp_retransmit {
    uint32_t size; /* set by the caller to sizeof(ibex_qp_retransmit_t) */
    uint32_t mode; /* ibex_retransmit_mode_t */
    uint64_t timeouts;       /* transport timeouts (the QP's timeout attribute) */
    uint64_t tail_timeouts;  /* RTO_low firings: few packets in flight, tail lost */
    uint64_t naks_sent;      /* PSN-sequence NAKs this QP's responder sent */
    uint64_t naks_received;  /* PSN-sequence NAKs this QP's requester received */
    uint64_t packets_resent; /* request packets sent more than once */
    uint64_t ooo_packets_held; /* requests held past a hole until it filled */
    uint32_t ooo_window;     /* packets the out-of-order store holds (0: go-back-N) */
    uint32_t inflight_cap;   /* selective mode's in-flight cap, packets (0: none) */
} ibex_qp_retransmit_t;

/* IBEX_ERR_NOT_SUPPORTED where the provider's NIC does the retransmission (verbs). */
IBEX_API ibex_status_t ibex_query_qp_retransmit(ibex_qp_t *qp, ibex_qp_retransmit_t *rt);

/* ------------------------------------------------------------------ GPU buffers */

/* Where a buffer lives. Every call that takes a buffer (ibex_reg_mr, the collectives)
 * accepts CUDA device memory too and finds out by itself: on verbs it is registered
 * for GPUDirect RDMA (dma-buf or peer memory), on the soft providers it is staged
 * through pinned host memory (see transport/verbs/README.md and allreduce/cuda/README.md). */
typedef enum ibex_memory_type {
    IBEX_MEMORY_HOST = 0,
    IBEX_MEMORY_CUDA_DEVICE = 1,  /* cudaMalloc: the CPU cannot touch it */
    IBEX_MEMORY_CUDA_MANAGED = 2, /* cudaMallocManaged: treated as host memory */
} ibex_memory_type_t;

/* IBEX_MEMORY_HOST for any pointer CUDA does not know, and always when the library was
 * built without CUDA or no driver/GPU is present. */
IBEX_API ibex_memory_type_t ibex_memory_type(const void *ptr);
/* 1 when this library was built with CUDA and a driver with at least one GPU is present. */
IBEX_API int ibex_cuda_available(void);

#ifdef __cplusplus
}
#endif

#endif /* IBEX_IBEX_H */
