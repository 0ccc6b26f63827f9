// A communicator: its bootstrap star (failure channel), its executor (QPs, data path), a
// registration cache, and a FIFO stream of collectives (driven as allreduce/stream_driver.h
// says). This file holds its state and its lifecycle: creation (bootstrap, QPs,
// calibration), split and destruction.
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <ibex/coll.h>

#include "allreduce/comm_options.h"
#include "allreduce/comm_topology.h"
#include "allreduce/executor.h"
#include "allreduce/fastbox.h"
#include "allreduce/mailbox.h"
#include "allreduce/gpu_staging.h"
#include "allreduce/op.h"
#include "allreduce/op_queue.h"
#include "allreduce/op_start.h"
#include "allreduce/reg_cache.h"
#include "allreduce/comm_memory.h"
#include "allreduce/selector.h"
#include "allreduce/shm_direct.h"
#include "allreduce/gpu_direct.h"
#include "allreduce/stream_driver.h"
#include "allreduce/sumsrv_client.h"
#include "runtime/bootstrap/bootstrap.h"

struct ibex_comm {
    int rank = 0;
    int nranks = 1;
    ibex::coll::CommOptions opt;
    std::unique_ptr<ibex::bootstrap::Bootstrap> boot;
    ibex::coll::Topology topo;
    ibex::coll::Executor exec;
    ibex::coll::RegCaches caches; // one per executor link
    ibex::coll::CommMemory memory; // ibex_comm_mem_alloc's; after caches (registrations go first)
    ibex::coll::Selector selector;
    ibex::coll::Fastbox fast; // after exec: its box goes before the executor's PD
    ibex::coll::Mailbox mail; // the same
    std::vector<int> peers;
    // Every pair of ranks has a QP: comm_connect_all ran. Never set from what this rank
    // alone sees: ranks already connected to every peer still join the others' exchange.
    bool all_connected = false;
    // The BiGraph placement rhd runs with (allreduce/algorithms/bigraph.cpp); empty: none.
    std::vector<int> bigraph_order;

    // Scratch for partial results (reduce-scatter, reduce) and the probe; grows on demand.
    void *scratch = nullptr;
    size_t scratch_bytes = 0;
    ibex::coll::ScheduleMemo last_schedule; // touched by the stream's driver only
    uint8_t small[64] = {}; // barrier operand and result

    std::thread thread;
    int wake_fd = -1;

    // The stream's driver: the progress thread, or a caller waiting on a request. Callers
    // announce themselves in waiters; the thread then hands the lock over and sleeps on
    // driver_cv (with mu), looking again now and then (stream_driver.cpp: kLongNap,
    // kShortNap) or when the last caller leaves work behind or a submission finds nobody
    // to drive it, until none has driven for handover_us: a caller waiting on one request
    // after another is back long before, and nobody pays a wake-up per request.
    std::mutex drive_mu;
    ibex::coll::DriveState drive;
    std::atomic<int> waiters{0};
    // Bumped whenever a caller stops driving or issues a collective without waiting; the
    // thread times handover_us from when it saw the count move, so callers read no clock.
    std::atomic<uint64_t> caller_turns{0};
    std::condition_variable driver_cv;
    // The driver sleeps in poll(): only then does a submission need to write wake_fd.
    std::atomic<bool> driver_asleep{false};

    std::mutex mu;
    std::condition_variable idle_cv;
    ibex::coll::OpQueue queue;
    bool running_op = false; // the progress thread holds an op
    // Under mu: the thread naps long while callers drive their own ops (nap_kick ends it).
    bool long_nap = false;
    bool nap_kick = false;
    // Set under mu; read without it too (a pass over a running op takes no lock).
    std::atomic<bool> stopping{false};
    std::atomic<bool> aborting{false};
    ibex_status_t error = IBEX_OK;
    std::string error_detail;

    // Touched only by the stream's driver, at the start and end of ops: kept after the
    // fields the caller and the progress thread share on every op.
    ibex::coll::ShmDirect direct;
    ibex::coll::GpuStaging gpu; // the staged GPU ops: running, prefetched, retired
    ibex::coll::GpuDirect gpu_direct; // GPU buffers of one host's ranks, mapped (CUDA IPC)
    ibex::coll::SumsrvClient sumsrv; // the summation servers (IBEX_SUMSRV), if any
};

namespace ibex::coll {

ibex_status_t comm_create(int nranks, const char *id_text, int rank, const CommOptions &opt, ibex_comm **out);
ibex_status_t comm_split(ibex_comm *c, int color, int key, ibex_comm **out);
ibex_status_t comm_destroy(ibex_comm *c, bool abort);
// The allreduce algorithm for a message: IBEX_ALGO / config->algo, else the cost model's
// choice (also when hierarchical is forced but the layout is uneven).
Algo comm_algo(const ibex_comm *c, size_t bytes);
// Whether reduce-scatter or allgather of `bytes` per rank runs hierarchically: forced with
// IBEX_ALGO=hierarchical, else when the cost model says it is cheaper than the flat ring.
bool comm_hierarchical(const ibex_comm *c, OpKind kind, size_t bytes);
// Collective: every rank's QP address for every other rank, all at once (zero where it has
// no QP); (*remote)[p] for each of `peers`: p's QP address for this rank.
ibex_status_t comm_exchange_addresses(ibex_comm *c, const std::vector<int> &peers, std::vector<ibex_ep_addr_t> *remote);
// Collective: connects this rank to every rank it has no QP to yet (the algorithms need
// only a few peers each; alltoall needs them all). Waits for the queued collectives first;
// a failure puts the communicator in its error state on every rank.
ibex_status_t comm_connect_all(ibex_comm *c);
// This rank and `peer` only (a send or receive between ranks no collective connected):
// connects their QP, swapping addresses through the bootstrap's relay. Waits for the
// queued operations first, then for the peer to make the same call (bounded by the
// communicator's timeout); a failure puts the communicator in its error state.
ibex_status_t comm_connect_pair(ibex_comm *c, int peer);
// Grows the communicator's scratch (registered) to at least bytes.
ibex_status_t comm_ensure_scratch(ibex_comm *c, size_t bytes);
// Frees the scratch (no collective may be running).
void comm_release_scratch(ibex_comm *c);

} // namespace ibex::coll
