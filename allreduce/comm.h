// A communicator: its bootstrap star (failure channel), its executor (QPs, data path), a
// registration cache, and a FIFO stream of collectives. The stream is driven by whoever
// holds the communicator's drive lock: a caller blocked in ibex_wait (or a blocking
// collective) takes it and runs the stream itself, as MPI and NCCL's proxy-less paths do,
// so a small collective costs no thread hand-offs; otherwise the progress thread runs it in
// the background. Both busy-poll only briefly, then sleep on the CQ's descriptor, the
// bootstrap sockets and a wake-up eventfd, so many ranks can share few cores.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <ibex/coll.h>

#include "allreduce/algorithms/algorithms.h"
#include "allreduce/executor.h"
#include "allreduce/reg_cache.h"
#include "allreduce/selector.h"
#include "runtime/bootstrap/bootstrap.h"

// A collective's completion, shared by the caller and the progress thread; whichever lets
// go last frees it.
struct ibex_request {
    ibex_comm *comm = nullptr; // the stream it belongs to (driven by a waiting caller)
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    ibex_status_t status = IBEX_OK;
    std::string detail;
    std::atomic<int> refs{2};
    void release() {
        if (refs.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
    }
};

namespace ibex::coll {

enum class OpKind { allreduce, reduce_scatter, allgather, broadcast, reduce, barrier, probe };

const char *op_kind_name(OpKind k);

struct Op {
    OpKind kind = OpKind::allreduce;
    CollArgs args;
    ibex_request *req = nullptr;
    // probe only
    int pings = 0;
    size_t bulk = 0;
    std::vector<uint64_t> *times = nullptr;
};

struct CommOptions {
    std::string device;
    int timeout_ms = 30000;
    bool forced = false;
    Algo algo = Algo::ring;
    ExecutorParams exec;
    int spin_us = 50;       // the progress thread's busy-poll after the last movement
    int wait_spin_us = -1;  // a waiting caller's; -1: 1 ms when this host's ranks fit its cores, else spin_us
    int handover_us = 200;  // the thread's pause after a caller hands the stream back
    bool own_core = false;  // every rank of this host can have a core (set at creation)
    bool probe = true;
};

// Reads config (may be NULL) and IBEX_* variables.
ibex_status_t comm_options(const ibex_comm_config_t *config, CommOptions *out);

// What the stream's driver keeps between passes; only the holder of drive_mu touches it.
struct DriveState {
    Op op;
    bool have = false; // op is the running one
    unsigned idle_passes = 0;
    std::chrono::steady_clock::time_point last_activity, last_move, last_boot_check;
};

} // namespace ibex::coll

struct ibex_comm {
    int rank = 0;
    int nranks = 1;
    ibex::coll::CommOptions opt;
    std::unique_ptr<ibex::bootstrap::Bootstrap> boot;
    ibex::coll::Executor exec;
    std::unique_ptr<ibex::coll::RegCache> cache;
    ibex::coll::Selector selector;
    std::vector<int> peers;

    // Scratch for partial results (reduce-scatter, reduce) and the probe; grows on demand.
    void *scratch = nullptr;
    size_t scratch_bytes = 0;
    uint8_t small[64] = {}; // barrier operand and result

    std::thread thread;
    int wake_fd = -1;

    // The stream's driver: the progress thread, or a caller waiting on a request. Callers
    // announce themselves in waiters; the thread then hands the lock over and sleeps on
    // driver_cv (with mu), looking again every millisecond, until none has driven for
    // handover_us: a caller waiting on one request after another is back long before, and
    // nobody pays a wake-up per request.
    std::mutex drive_mu;
    ibex::coll::DriveState drive;
    std::atomic<int> waiters{0};
    std::atomic<int64_t> last_waiter_ns{0}; // when the last caller stopped driving (steady clock)
    std::condition_variable driver_cv;
    // The driver sleeps in poll(): only then does a submission need to write wake_fd.
    std::atomic<bool> driver_asleep{false};

    std::mutex mu;
    std::condition_variable idle_cv;
    std::deque<ibex::coll::Op> queue;
    bool running_op = false; // the progress thread holds an op
    bool stopping = false;
    bool aborting = false;
    ibex_status_t error = IBEX_OK;
    std::string error_detail;
};

namespace ibex::coll {

ibex_status_t comm_create(int nranks, const char *id_text, int rank, const CommOptions &opt, ibex_comm **out);
// Queues an op; fails at once (without queueing) when the communicator is in error.
ibex_status_t comm_submit(ibex_comm *c, Op &&op, ibex_request **req);
// Waits for r, driving the stream meanwhile; frees r and returns its status.
ibex_status_t request_wait(ibex_request *r);
// One non-blocking pass of the stream when nobody else drives it (ibex_test).
void request_poke(ibex_request *r);
// Blocks until every queued op has finished.
ibex_status_t comm_drain(ibex_comm *c);
ibex_status_t comm_split(ibex_comm *c, int color, int key, ibex_comm **out);
ibex_status_t comm_destroy(ibex_comm *c, bool abort);
Algo comm_algo(const ibex_comm *c, size_t bytes);

} // namespace ibex::coll
