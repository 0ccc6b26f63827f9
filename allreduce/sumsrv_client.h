// A communicator's side of the summation service (allreduce/algorithms/sumsrv.cpp says
// what the algorithm is, allreduce/sumsrv_wire.h what goes over the wire): one TCP control
// connection and one RC QP to each server of IBEX_SUMSRV, opened with the communicator.
// During a sumsrv allreduce it pushes its partition for each server chunk by chunk, at
// most `slots` chunks ahead, and copies each chunk's sum into recvbuf as it comes back,
// while the executor runs the workers' part. A server that closes its connection, a QP
// error or a server's "failed" frame fails the running collective with the server's name.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <ibex/coll.h>

#include "runtime/qp_connect.h"

namespace ibex::coll {

struct SumsrvSettings {
    std::vector<std::string> servers; // host:port, in server order
    std::string device;               // the device this rank opens for them
    uint32_t chunk_bytes = 256 << 10; // a multiple of 8
    uint32_t slots = 16;
    int timeout_ms = 30000; // connecting and the hello
    QpChoice qp; // the communicator's (ibex_comm_config_t.qp_attr)
};

// Parses IBEX_SUMSRV ("host:port,host:port"); empty text gives no servers.
ibex_status_t parse_sumsrv_list(const char *text, std::vector<std::string> *out);

class SumsrvClient {
public:
    SumsrvClient() = default;
    SumsrvClient(const SumsrvClient &) = delete;
    SumsrvClient &operator=(const SumsrvClient &) = delete;
    ~SumsrvClient() { close(); }

    // Connects to every server; `job` is the same text on every rank of the communicator.
    ibex_status_t open(const SumsrvSettings &s, const std::string &job, int rank, int nranks);
    void close();
    int servers() const { return static_cast<int>(conns_.size()); }
    // The QP to server s.
    ibex_qp_t *qp(int server) const { return conns_[static_cast<size_t>(server)].qp; }
    // How many servers this rank reached on its own machine (loopback, or its own address):
    // they share its cores and its link, which BytePS's gain assumes they do not.
    int servers_on_this_machine() const { return here_; }
    // Whether any rank of the communicator did (agreed over the bootstrap by the caller).
    void set_some_on_a_workers_machine(bool v) { some_here_ = v; }
    bool some_on_a_workers_machine() const { return some_here_; }

    // Starts the servers' share of an allreduce: part s (bytes at byte offset off of the
    // buffers) goes to server s. Empty parts are done at once.
    struct Part {
        size_t off = 0, bytes = 0;
    };
    ibex_status_t start(const void *sendbuf, void *recvbuf, ibex_datatype_t type, ibex_redop_t op,
                        std::span<const Part> parts);
    // Pushes what the window allows and takes the sums that came back; moved: anything did.
    ibex_status_t progress(bool *moved);
    bool active() const { return active_; }
    bool done() const;
    void finish() { active_ = false; }
    // The collective failed elsewhere: stop without waiting for its chunks.
    void abandon() { active_ = false; }

    // For the driver's nap: true when nothing is pending in the CQ (its descriptor is
    // armed); fds() adds the CQ's descriptor and the control connections.
    bool arm();
    void fds(std::vector<int> *out) const;
    // "sumsrv server H:P: pushed a/b chunks, b summed" for the running op's slowest server.
    std::string stall_detail() const;

private:
    struct Conn {
        std::string name;
        int fd = -1;
        ibex_qp_t *qp = nullptr;
        void *push_mem = nullptr, *result_mem = nullptr;
        ibex_mr_t *push_mr = nullptr, *result_mr = nullptr;
        uint64_t remote_push = 0;
        uint32_t remote_rkey = 0;
        uint32_t next_seq = 0; // the running chunk sequence (immediate) of this connection
        uint8_t busy[64] = {}; // push slot j's WRITE not yet completed
        // The running op's part.
        size_t off = 0, bytes = 0, chunks = 0, pushed = 0, summed = 0;
        uint32_t first_seq = 0;
        // A "failed" frame arriving in pieces.
        uint8_t frame[256] = {};
        size_t frame_got = 0;
    };
    ibex_status_t post_result_recv(Conn &c, size_t slot);
    ibex_status_t push(size_t ci, Conn &c);
    ibex_status_t take_result(Conn &c, uint32_t imm);
    ibex_status_t check_control(Conn &c);
    ibex_status_t conn_fail(const Conn &c, const char *fmt, ...) const __attribute__((format(printf, 3, 4)));

    ibex_context_t *ctx_ = nullptr;
    ibex_pd_t *pd_ = nullptr;
    ibex_cq_t *cq_ = nullptr;
    std::vector<Conn> conns_;
    SumsrvSettings settings_;
    int nranks_ = 1;
    bool active_ = false;
    int here_ = 0;
    bool some_here_ = false;
    const uint8_t *send_ = nullptr;
    uint8_t *recv_ = nullptr;
    ibex_datatype_t type_ = IBEX_F32;
    ibex_redop_t op_ = IBEX_SUM;
    uint64_t polls_ = 0; // the control connections are looked at every 16th progress
};

} // namespace ibex::coll
