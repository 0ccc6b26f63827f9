/*
 * ibex — communicators and collectives: the public C API.
 *
 * NCCL-shaped: rank 0 creates a unique id (a rendezvous address), hands it to every rank
 * by any means (or the ranks read IBEX_ROOT_ADDR / their launcher's environment), and
 * every rank calls ibex_comm_init_rank() with it. Collectives are queued on the
 * communicator's stream and progress asynchronously, in the order they were issued; each
 * returns a request to test or wait, or completes before returning when req is NULL.
 * Every rank of a communicator must issue the same collectives in the same order.
 *
 * In-place follows NCCL: allreduce/broadcast/reduce with sendbuf == recvbuf; allgather
 * with sendbuf == recvbuf + rank * sendcount elements; reduce_scatter with
 * recvbuf == sendbuf + rank * recvcount elements.
 *
 * Errors: a failed or timed-out collective (IBEX_TIMEOUT_MS, default 30000) fails on
 * every rank with IBEX_ERR_REMOTE or IBEX_ERR_TIMEOUT and leaves the communicator in an
 * error state; ibex_comm_abort() then frees it without waiting for peers.
 */
#ifndef IBEX_COLL_H
#define IBEX_COLL_H

#include "ibex/ibex.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ibex_comm ibex_comm_t;
typedef struct ibex_request ibex_request_t;

typedef enum ibex_datatype {
    IBEX_U8 = 0,
    IBEX_I32 = 1,
    IBEX_I64 = 2,
    IBEX_F16 = 3,  /* IEEE binary16 */
    IBEX_BF16 = 4, /* bfloat16 */
    IBEX_F32 = 5,
    IBEX_F64 = 6,
    IBEX_DATATYPE_COUNT
} ibex_datatype_t;

typedef enum ibex_redop {
    IBEX_SUM = 0,
    IBEX_PROD = 1,
    IBEX_MIN = 2,
    IBEX_MAX = 3,
    IBEX_AVG = 4, /* sum divided by the number of ranks (integers: truncated) */
    IBEX_REDOP_COUNT
} ibex_redop_t;

/* Bytes of one element (0 for an unknown type). Names as nccl-tests prints them
 * ("float", "half", "bfloat16", "double", "int32", "int64", "uint8"; "sum", "prod", ...). */
IBEX_API size_t ibex_datatype_size(ibex_datatype_t type);
IBEX_API const char *ibex_datatype_name(ibex_datatype_t type);
IBEX_API const char *ibex_redop_name(ibex_redop_t op);

/* ------------------------------------------------------------------ bootstrap */

#define IBEX_UNIQUE_ID_BYTES 128

/* A NUL-terminated string "host:port/token": where rank 0 listens, and a random token
 * that keeps unrelated jobs apart. Printable, so launch scripts can pass it around. */
typedef struct ibex_unique_id {
    char text[IBEX_UNIQUE_ID_BYTES];
} ibex_unique_id_t;

/* Called once, by the rank that will be rank 0: opens the rendezvous listener (address
 * from IBEX_ROOT_ADDR "host:port" if set, else an ephemeral port on loopback or on
 * IBEX_BOOTSTRAP_ADDR) and returns its id. */
IBEX_API ibex_status_t ibex_get_unique_id(ibex_unique_id_t *id);

#define IBEX_MAGIC_COMM_CONFIG 0x4942584du /* IBXM */

typedef struct ibex_comm_config {
    uint32_t size;
    uint32_t magic; /* IBEX_MAGIC_COMM_CONFIG */
    uint32_t version;
    uint32_t reserved0;
    /* Device every rank opens, e.g. "udp:lo" (NULL: IBEX_DEVICE, else the first listed; across
     * hosts the first listed that leaves the machine).
     * "rail" ("rail:udp", "rail:verbs"): each rank opens the NIC that ibex_topo_bind gives
     * its local rank (its RDMA device where verbs lists it, else udp on its netdev). */
    const char *device;
    /* Milliseconds a collective may wait on a peer before failing (0: IBEX_TIMEOUT_MS,
     * else 30000). */
    int32_t timeout_ms;
    int32_t reserved1;
    /* Algorithm for allreduce: "ring", "rhd", "tree", "hierarchical", "bigraph" (rhd with
     * the BiGraph placement, which IBEX_BIGRAPH_HOSTS_PER_SWITCH describes), "gdraa" or NULL
     * (IBEX_ALGO, else the cost model decides per message size). */
    const char *algo;
    /* Since 0.9: the attributes every QP of the communicator is connected with, as
     * ibex_qp_connect_attr takes them (IBEX_QP_TRAFFIC_CLASS and IBEX_QP_SL to put its
     * traffic in a lossless class, IBEX_QP_TIMEOUT, IBEX_QP_RETRY_CNT, ...). attr_mask 0:
     * ibex's defaults, with IBEX_TRAFFIC_CLASS and IBEX_SL from the environment. Read during
     * init (the struct need not outlive it); every rank must give the same (init fails on
     * all of them, naming both, where one differs); ibex_comm_split's communicators keep
     * their parent's. The summation servers' QPs (IBEX_SUMSRV) get them too. */
    const ibex_qp_attr_t *qp_attr;
    uint32_t qp_attr_mask;
    uint32_t reserved2;
} ibex_comm_config_t;

#define IBEX_COMM_CONFIG_INIT                                                                   \
    {sizeof(ibex_comm_config_t), IBEX_MAGIC_COMM_CONFIG, IBEX_ATTR_VERSION, 0, NULL, 0, 0, NULL, NULL, 0, 0}

/* Collective over all nranks ranks: blocks until every rank has joined (or the timeout).
 * config may be NULL. */
IBEX_API ibex_status_t ibex_comm_init_rank(ibex_comm_t **comm, int nranks,
                                           const ibex_unique_id_t *id, int rank,
                                           const ibex_comm_config_t *config);

/* Rank, size and rendezvous from the launcher's environment: Open MPI
 * (OMPI_COMM_WORLD_RANK/SIZE), Slurm (SLURM_PROCID/SLURM_NTASKS), torchrun (RANK,
 * WORLD_SIZE, MASTER_ADDR, MASTER_PORT), or IBEX_RANK/IBEX_NRANKS; the rendezvous is
 * IBEX_ROOT_ADDR, else MASTER_ADDR:MASTER_PORT. Rank 0 listens there. */
IBEX_API ibex_status_t ibex_comm_init_from_env(ibex_comm_t **comm,
                                               const ibex_comm_config_t *config);

/* Collective over comm: ranks with the same color form a new communicator, ordered by
 * key then old rank; color < 0 gives *newcomm = NULL. */
IBEX_API ibex_status_t ibex_comm_split(ibex_comm_t *comm, int color, int key,
                                       ibex_comm_t **newcomm);
/* Waits for queued operations, then frees. Collective when the communicator is healthy:
 * it also waits (bounded by the timeout) until every rank has reached destroy, so no rank
 * tears down connections a slower one still needs, and a rank that exits without it is
 * reported to the others as failed. */
IBEX_API ibex_status_t ibex_comm_destroy(ibex_comm_t *comm);
/* Fails every queued operation and frees, without waiting for any peer. The other ranks'
 * communicators enter their error state (IBEX_ERR_REMOTE). */
IBEX_API ibex_status_t ibex_comm_abort(ibex_comm_t *comm);
IBEX_API ibex_status_t ibex_comm_rank(const ibex_comm_t *comm, int *rank);
IBEX_API ibex_status_t ibex_comm_size(const ibex_comm_t *comm, int *nranks);
/* IBEX_OK, or the error that put the communicator in its error state. */
IBEX_API ibex_status_t ibex_comm_get_async_error(ibex_comm_t *comm, ibex_status_t *error);
/* Name of the algorithm allreduce uses for a message of `bytes` ("ring", "rhd", "tree",
 * "hierarchical", "bigraph", "gdraa", or on one host "fastbox" and "direct"). */
IBEX_API const char *ibex_comm_allreduce_algo(const ibex_comm_t *comm, size_t bytes);
/* The cost model's time for that allreduce, in microseconds (since 0.4; -1: no comm). */
IBEX_API double ibex_comm_allreduce_predict_us(const ibex_comm_t *comm, size_t bytes);

/* Where a communicator's ranks run, how this rank reaches them and what the cost model
 * measured (since 0.4). Ranks with the same host identity (hostname, boot id and network
 * namespace, or IBEX_HOST_ID) share a host; peers of the same host are reached over the
 * shm device unless IBEX_SHM=0. */
typedef struct ibex_comm_topology {
    uint32_t size;           /* set by the caller to sizeof(ibex_comm_topology_t); a
                              * struct of an older release (smaller) gets its fields only */
    int32_t hosts;
    int32_t ranks_per_host;  /* the same on every host, else 0 (uneven) */
    int32_t local_ranks;     /* ranks on this rank's host, itself included */
    int32_t shm_peers;       /* peers this rank has a connection to over shm */
    int32_t net_peers;       /* ... over the communicator's device */
    uint64_t shm_tx_bytes;   /* bytes this rank's shm context has sent so far */
    uint64_t net_tx_bytes;   /* bytes this rank's device context has sent so far */
    double alpha_us, beta_ns_per_byte;             /* between hosts */
    double local_alpha_us, local_beta_ns_per_byte; /* inside a host */
    double gamma_ns_per_byte;                      /* reduction */
    /* Since 0.5.1: the per-byte costs above hold for collectives of up to small_bytes per
     * rank; these hold from big_bytes on, where buffers no longer fit the caches (the model
     * interpolates between the two; 0: not measured, as above). */
    uint64_t small_bytes, big_bytes;
    double big_beta_ns_per_byte, big_local_beta_ns_per_byte, big_gamma_ns_per_byte;
    /* Since 0.6.1: what each phase boundary of a hierarchical collective adds to the sum of
     * its phases, measured at creation by timing the hierarchical allreduce itself at
     * small_bytes (0: not measured, or no boundaries: one host, one rank per host). */
    double hier_join_us;
    /* Since 0.6.2: where hier_join_us is measured, hierarchical and rhd (recursive
     * halving-doubling, its rival there: the same bytes cross the hosts' links) are both
     * timed at small_bytes and big_bytes, and each one's modeled cost is fitted to its two
     * times: scale x (the sum of its phases or steps) + joins x join. rhd_join_us is per
     * change of partner between rhd's steps; hier_join_us (above) is then the fitted one.
     * Scales of 1 and joins of 0: not timed. */
    double rhd_join_us;
    double hier_scale, rhd_scale;
    /* Since 0.7.0: the length long transfers are cut into (every rank's the same: the
     * largest of the ranks' IBEX_COMM_SLICE or device default, see ibex_query_device) and
     * this rank's staging slots of it per peer. */
    uint64_t slice_bytes;
    int32_t staging_slots;
    int32_t reserved;
} ibex_comm_topology_t;
IBEX_API ibex_status_t ibex_comm_query_topology(const ibex_comm_t *comm, ibex_comm_topology_t *topology);
/* The device this rank reaches `peer` through ("shm", "udp:lo", ...), or NULL when it has
 * no connection to that rank (the algorithms never pair them) or peer is out of range. */
IBEX_API const char *ibex_comm_peer_device(const ibex_comm_t *comm, int peer);

/* Optional: register a buffer ahead of time (it is otherwise registered on first use and
 * kept in the communicator's registration cache until deregistered or the comm ends). */
IBEX_API ibex_status_t ibex_comm_register(ibex_comm_t *comm, void *buf, size_t bytes);
IBEX_API ibex_status_t ibex_comm_deregister(ibex_comm_t *comm, void *buf);

/* Memory for collective buffers (since 0.6; NCCL's ncclMemAlloc). Where the communicator's
 * ranks share one host over shm and its large one-host collectives run directly (see
 * ibex_comm_allreduce_algo: "direct"), it is memory the peers map: a collective whose
 * buffers lie in such memory reads and writes them in place, with no staging copy (a rank
 * whose buffers are ordinary memory still takes part, through staging or cross-memory
 * attach). Elsewhere, and on any other communicator, it is ordinary page-aligned memory.
 * bytes > 0. Free it with
 * ibex_comm_mem_free on the same communicator, with no collective on it running, before
 * ibex_comm_destroy (which frees what is left). */
IBEX_API ibex_status_t ibex_comm_mem_alloc(ibex_comm_t *comm, size_t bytes, void **ptr);
IBEX_API ibex_status_t ibex_comm_mem_free(ibex_comm_t *comm, void *ptr);

/* ------------------------------------------------------------------ collectives */

/* req: NULL to complete before returning, else receives a request handle. */
IBEX_API ibex_status_t ibex_allreduce(const void *sendbuf, void *recvbuf, size_t count,
                                      ibex_datatype_t type, ibex_redop_t op, ibex_comm_t *comm,
                                      ibex_request_t **req);
IBEX_API ibex_status_t ibex_reduce_scatter(const void *sendbuf, void *recvbuf, size_t recvcount,
                                           ibex_datatype_t type, ibex_redop_t op,
                                           ibex_comm_t *comm, ibex_request_t **req);
IBEX_API ibex_status_t ibex_allgather(const void *sendbuf, void *recvbuf, size_t sendcount,
                                      ibex_datatype_t type, ibex_comm_t *comm,
                                      ibex_request_t **req);
/* Since 0.9. Rank r's block for rank p, count elements at sendbuf + p * count, lands at
 * recvbuf + r * count on rank p (MPI_Alltoall with equal counts; torch's all_to_all_single).
 * Not in place: the two buffers must not overlap. The other collectives connect each rank
 * to a few peers; the first alltoall on a communicator connects every remaining pair
 * (collective, after the collectives queued before it: a communicator that never calls
 * alltoall holds no more QPs than before). */
IBEX_API ibex_status_t ibex_alltoall(const void *sendbuf, void *recvbuf, size_t count, ibex_datatype_t type,
                                     ibex_comm_t *comm, ibex_request_t **req);
/* Since 0.9. Uneven blocks (MPI_Alltoallv): sendcounts[p] elements at sendbuf + sdispls[p]
 * go to rank p, and recvcounts[q] elements from rank q land at recvbuf + rdispls[q]
 * (counts and displacements in elements; each array holds nranks). Rank r's sendcounts[p]
 * must be rank p's recvcounts[r]: where they differ, the rank that finds it fails and the
 * communicator enters its error state on every rank (nothing is written past a block a
 * rank announced). The receive blocks may not
 * overlap each other or the send buffer's blocks. The arrays are copied: they need not
 * outlive the call. Connects every pair at its first call, as ibex_alltoall does. */
IBEX_API ibex_status_t ibex_alltoallv(const void *sendbuf, const size_t *sendcounts, const size_t *sdispls,
                                      void *recvbuf, const size_t *recvcounts, const size_t *rdispls,
                                      ibex_datatype_t type, ibex_comm_t *comm, ibex_request_t **req);
IBEX_API ibex_status_t ibex_broadcast(const void *sendbuf, void *recvbuf, size_t count,
                                      ibex_datatype_t type, int root, ibex_comm_t *comm,
                                      ibex_request_t **req);
/* recvbuf is used on root only (may be NULL elsewhere). */
IBEX_API ibex_status_t ibex_reduce(const void *sendbuf, void *recvbuf, size_t count,
                                   ibex_datatype_t type, ibex_redop_t op, int root,
                                   ibex_comm_t *comm, ibex_request_t **req);
IBEX_API ibex_status_t ibex_barrier(ibex_comm_t *comm, ibex_request_t **req);

/* ------------------------------------------------------------------ point to point */

/* Since 0.10. A send to one rank or a receive from one, on the communicator's stream (in
 * issue order with its collectives). The i-th send rank a issues to rank b is the i-th
 * receive rank b issues from rank a (no tags, as NCCL): the two must move the same number
 * of bytes, else both ranks fail and the communicator enters its error state. A pair of
 * ranks that no collective connected gets its QP at its first send or receive, with only
 * the two ranks taking part (the call then waits for the peer's). Buffers may be host or
 * GPU memory (GPU buffers are staged through pinned host memory, whole: a send's copy to
 * the host before the operation starts, a receive's copy to the GPU after it). A send of
 * more than a few KiB may return only once its receiver has copied it. */
typedef enum { IBEX_P2P_SEND = 0, IBEX_P2P_RECV = 1 } ibex_p2p_kind_t;

typedef struct {
    ibex_p2p_kind_t kind;
    int peer;
    void *buf; /* read by a send, written by a receive */
    size_t count;
    ibex_datatype_t type;
} ibex_p2p_op_t;

IBEX_API ibex_status_t ibex_send(const void *buf, size_t count, ibex_datatype_t type, int peer,
                                 ibex_comm_t *comm, ibex_request_t **req);
IBEX_API ibex_status_t ibex_recv(void *buf, size_t count, ibex_datatype_t type, int peer,
                                 ibex_comm_t *comm, ibex_request_t **req);
/* Since 0.10. Several sends and receives that run together, as one operation of the stream
 * (NCCL's ncclGroupStart/End around them; torch's batch_isend_irecv): two ranks that each
 * send to the other and receive from it must put both in one batch, since separate calls
 * run one after the other and each would wait for the other's receive. A send to this rank
 * itself takes the batch's next receive from itself. Receive buffers may not overlap each
 * other or a send buffer of the batch; ops of count 0 move nothing. ops is copied. */
IBEX_API ibex_status_t ibex_p2p_batch(const ibex_p2p_op_t *ops, size_t nops, ibex_comm_t *comm,
                                      ibex_request_t **req);

/* *done = 1 once the operation has finished; the request is then freed and its status
 * returned. */
IBEX_API ibex_status_t ibex_test(ibex_request_t *req, int *done);
/* Waits (bounded by the communicator's timeout: a collective that makes no progress for
 * that long fails), frees the request, returns its status. */
IBEX_API ibex_status_t ibex_wait(ibex_request_t *req);

#ifdef __cplusplus
}
#endif

#endif /* IBEX_COLL_H */
