// The out-of-band network of a communicator: every rank holds one TCP connection to rank 0
// (a star). It carries the join handshake, small all-gathers (endpoint addresses, split
// colours), barriers, messages between two ranks (relayed by rank 0: the two ranks of a
// send and its receive connect their QP without the others), and afterwards stays open as
// the failure channel: a rank that fails sends an abort that rank 0 relays to all, and a
// connection that closes without a goodbye means its process died. Frames: u32 type, u32
// length (network order), payload.
#pragma once

#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <ibex/ibex.h>

namespace ibex::bootstrap {

class Bootstrap {
public:
    // Blocks until all nranks have joined through the rendezvous named by id_text
    // ("host:port/token"), or timeout_ms passes. Rank 0 listens (reusing the listener of
    // ibex_get_unique_id() when this process created the id).
    static ibex_status_t join(const char *id_text, int rank, int nranks, int timeout_ms,
                              std::unique_ptr<Bootstrap> *out);
    ~Bootstrap();
    Bootstrap(const Bootstrap &) = delete;
    Bootstrap &operator=(const Bootstrap &) = delete;

    int rank() const { return rank_; }
    int nranks() const { return nranks_; }

    // all receives nranks * len bytes, rank i's at i * len.
    ibex_status_t allgather(const void *mine, size_t len, void *all, int timeout_ms);
    ibex_status_t barrier(int timeout_ms);
    // A message to one rank, and the next from one rank (in the order that rank sent them),
    // through rank 0; rank 0 forwards whenever it looks at its connections (any call here,
    // or healthy() from its progress loop). Only the two ranks take part.
    ibex_status_t send_to(int peer, const void *data, size_t len, int timeout_ms);
    ibex_status_t recv_from(int peer, std::vector<uint8_t> *data, int timeout_ms);

    // For the owner's progress loop: descriptors to watch for readability, and a
    // non-blocking check that returns false (with the status and detail) once any rank
    // has aborted or a connection closed without a goodbye.
    std::vector<int> fds() const;
    // The local IPv4 address this rank's bootstrap traffic uses (one its peers can reach).
    std::string local_ip() const;
    bool healthy(ibex_status_t *status, std::string *detail);
    // Tells every rank (through rank 0) that this one failed. Best effort, bounded.
    void send_abort(ibex_status_t status, const char *detail);
    // Orderly close: no rank closes before all have said goodbye, so nobody mistakes a
    // finished peer for a dead one. Bounded by timeout_ms.
    void goodbye(int timeout_ms);

private:
    struct Frame {
        uint32_t type;
        std::vector<uint8_t> payload;
    };
    struct Conn {
        int fd = -1;
        int rank = -1;
        std::vector<uint8_t> in;
        std::deque<Frame> frames; // data-carrying frames not yet consumed
        bool closed = false;
        bool bye = false;
    };

    Bootstrap(int rank, int nranks) : rank_(rank), nranks_(nranks) {}
    static ibex_status_t accept_all(Bootstrap &b, int listen_fd, const std::string &token, int timeout_ms);
    bool send_frame(Conn &c, uint32_t type, const void *data, size_t len, int timeout_ms);
    // Reads what is available on every connection (mu_ held) and handles control frames.
    void pump();
    // A kRelay frame's message: kept when it is for this rank, forwarded on rank 0.
    void relay(uint32_t to, uint32_t from, const uint8_t *msg, size_t len);
    void note_failure(ibex_status_t status, const std::string &detail, int origin, bool relay);
    // Waits (mu_ not held) until pred() holds under mu_, or failure, or the deadline.
    template <typename Pred>
    ibex_status_t wait_for(Pred pred, int timeout_ms, const char *what);

    const int rank_;
    const int nranks_;
    mutable std::mutex mu_;
    std::vector<Conn> conns_; // rank 0: one per other rank (conns_[r - 1]); others: one, to rank 0
    // Messages from each rank (send_to), not yet taken by recv_from; apart from the frames
    // of the all-gathers, which a message arriving in the middle of one must not disturb.
    std::vector<std::deque<std::vector<uint8_t>>> inbox_;
    bool failed_ = false;
    ibex_status_t fail_status_ = IBEX_OK;
    std::string fail_detail_;
    bool closing_ = false;
};

} // namespace ibex::bootstrap
