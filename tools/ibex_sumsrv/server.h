// ibex_sumsrv's server: BytePS's summation service over ibex RC QPs. It accepts workers on
// a TCP port, groups them into jobs by the key in their hello (one job per communicator),
// gives each worker an RC QP and `slots` push slots, and for every chunk that all of a
// job's workers have pushed writes the sum back into each worker's result slot (the wire
// format is allreduce/sumsrv_wire.h; the worker's side allreduce/sumsrv_client.h).
//
// Sums are taken in rank order with the host reduction kernels (allreduce/cpu), split over
// a thread pool by element ranges, so every worker gets the same bits whatever the thread
// count. A job fails as a whole: when a worker's connection closes, or a push is malformed
// or disagrees with the others (type, op or size), every remaining worker of the job gets
// a "failed" frame naming the reason and the job's connections close.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <ibex/ibex.h>

#include "allreduce/sumsrv_wire.h"
#include "tools/ibex_sumsrv/reduce_pool.h"

namespace ibex::sumsrv {

struct ServerOptions {
    std::string listen = "0.0.0.0:0"; // host:port (port 0: any)
    std::string device;               // empty: the device each job's workers name
    int threads = 4;                  // summing threads, the serving thread included
    int hello_timeout_ms = 10000;     // a connection that has not said hello by then is closed
};

struct ServerStats {
    uint64_t jobs = 0, chunks = 0, bytes = 0; // bytes: summed payload, one worker's worth per chunk
    uint64_t failed_jobs = 0;
};

class Server {
public:
    Server() = default;
    ~Server();
    Server(const Server &) = delete;
    Server &operator=(const Server &) = delete;

    ibex_status_t open(const ServerOptions &o);
    uint16_t port() const { return port_; }
    // Serves until *stop turns true (looked at every 100 ms at most).
    ibex_status_t run(const std::atomic<bool> &stop);
    const ServerStats &stats() const { return stats_; }
    // Why the last job failed ("" when none has).
    const std::string &last_failure() const { return last_failure_; }

private:
    struct Pending { // accepted; its hello is still arriving
        int fd = -1;
        std::chrono::steady_clock::time_point since;
        uint8_t frame[coll::sumsrv::kFrameBytes] = {};
        size_t got = 0;
    };
    struct Worker {
        int fd = -1;
        ibex_qp_t *qp = nullptr;
        void *push_mem = nullptr;
        ibex_mr_t *push_mr = nullptr;
        uint64_t result_addr = 0;
        uint32_t result_rkey = 0;
        uint32_t arrived = 0; // pushes received
        bool left = false;    // its control connection closed
    };
    struct Job {
        std::string key, device;
        uint32_t nranks = 0, chunk = 0, slots = 0;
        ibex_context_t *ctx = nullptr;
        ibex_pd_t *pd = nullptr;
        ibex_cq_t *cq = nullptr;
        void *result_mem = nullptr;
        ibex_mr_t *result_mr = nullptr;
        std::vector<Worker> workers; // by rank; fd < 0: not joined yet
        std::vector<uint32_t> writes_out; // per result slot: WRITEs of its sum not yet completed
        uint32_t next_sum = 0;
        uint32_t joined = 0, left = 0;
    };

    void accept_new();
    void read_hello(Pending &p, bool *finished);
    // Takes a worker into its job (making the job on its first worker); refuses with a reason.
    void admit(int fd, const coll::sumsrv::Hello &h);
    void refuse(int fd, const std::string &why);
    ibex_status_t open_job(Job &j);
    ibex_status_t add_worker(Job &j, int fd, const coll::sumsrv::Hello &h, coll::sumsrv::Reply *r);
    // Completions and sums; false when the job failed (it is then closed).
    bool serve(Job &j, bool *moved);
    bool sum_next(Job &j, std::string *why);
    void fail_job(Job &j, const std::string &why);
    void close_job(Job &j);
    bool arm_all();

    ServerOptions opt_;
    int listen_fd_ = -1;
    uint16_t port_ = 0;
    std::unique_ptr<ReducePool> pool_;
    std::vector<Pending> pending_;
    std::map<std::string, std::unique_ptr<Job>> jobs_;
    ServerStats stats_;
    std::string last_failure_;
};

} // namespace ibex::sumsrv
