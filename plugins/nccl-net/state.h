// The plugin's state and its version-independent calls. plugin.cpp adapts them to each
// ABI table (nccl_net_abi.h); devices.cpp, setup.cpp and transfer.cpp implement them.
//
// Protocol over one RC QP per comm (NCCL comms are one-directional):
//   receiver -> sender  CTS: SEND of {seq, n, per receive: address, rkey, size, tag}
//   sender   -> receiver data: RDMA WRITE into the matching receive's buffer, then
//                       FIN: SEND of {seq, receive index, size}
// RC delivers the FIN after the data, so a FIN's receive completion means the data is in
// place. Both control messages land in receive slots posted up front, so nothing is
// allocated per message. Connection set-up runs over a short-lived TCP socket, in
// non-blocking steps, as NCCL's proxy calls connect/accept until they return a comm.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>

#include <ibex/ibex.h>

#include "plugins/nccl-net/handles.h"
#include "plugins/nccl-net/nccl_net_abi.h"

namespace ibex_nccl {

inline constexpr int kMaxRecvs = 8;          // largest grouped receive
inline constexpr uint32_t kCtsSlots = 64;    // receives in flight per comm (NCCL: <= 32)
inline constexpr uint32_t kMaxSends = 64;    // sends in flight per comm
inline constexpr uint32_t kFinSlots = kCtsSlots * kMaxRecvs;
inline constexpr uint32_t kMagic = 0x4e584249u; // "IBXN"

struct CtsMessage {
    uint64_t seq;
    int32_t n;
    int32_t reserved;
    struct Entry {
        uint64_t addr;
        uint64_t size;
        uint32_t rkey;
        int32_t tag;
    } entries[kMaxRecvs];
};

struct FinMessage {
    uint64_t seq;
    uint32_t index; // which receive of the group
    uint32_t reserved;
    uint64_t size;
};

// The registered control memory of one comm: what its QP sends and receives.
struct ControlBlock {
    std::array<CtsMessage, kCtsSlots> cts;       // sender: receive slots; receiver: send slots
    std::array<FinMessage, kFinSlots> fin;       // receiver: receive slots
    std::array<FinMessage, kMaxSends> fin_send;  // sender: send slots
};

enum class SetupStep { None, Connecting, ExchangingInfo, AwaitingReady, Done };

struct Comm {
    bool is_send = false;
    int dev = -1;
    ibex_cq_t *cq = nullptr;
    ibex_qp_t *qp = nullptr;
    ControlBlock *control = nullptr;
    ibex_mr_t *control_mr = nullptr;
    // Set-up (setup.cpp).
    SetupStep step = SetupStep::None;
    int fd = -1;
    uint64_t token = 0;
    std::array<uint8_t, 64> peer_info{};
    size_t peer_info_got = 0;
    bool info_sent = false;
    // Sender: the CTS of receive `send_head` and which of its entries were used.
    uint64_t send_head = 0;
    std::array<bool, kCtsSlots> cts_ready{};
    std::array<uint8_t, kCtsSlots> entries_used{}; // bit i: entry i sent
    uint64_t fin_counter = 0;
    uint32_t sends_in_flight = 0;
    // Receiver: the request of each receive in flight, by seq % kCtsSlots.
    uint64_t recv_seq = 0;
    std::array<void *, kCtsSlots> recv_requests{};
    // A failed completion: every later call on the comm fails with this.
    bool failed = false;
    std::string failure;
    int traffic_class = -1; // the communicator's (NCCL's per-comm config); -1: NCCL_IB_TC's
};

struct ListenComm {
    int dev = -1;
    int fd = -1;
    uint64_t token = 0;
    void *pending = nullptr; // the recv comm accept() is building
};

struct Memory {
    ibex_mr_t *mr = nullptr;
    uintptr_t addr = 0;
    size_t size = 0;
    uint32_t lkey = 0;
    uint32_t rkey = 0;
};

enum class RequestKind : uint8_t { Send, Recv, Flush };

struct Request {
    RequestKind kind = RequestKind::Send;
    void *comm = nullptr;
    int n = 0;
    int received = 0;
    bool done = false;
    std::array<size_t, kMaxRecvs> sizes{};
};

// What one init of a v11+ table made: NCCL inits the plugin once per communicator and
// passes the context to that communicator's listen, connect, setNetAttr and finalize.
struct NetContext {
    uint64_t comm_id = 0;
    int traffic_class = -1; // NCCL's per-comm config; -1: undefined (NCCL_IB_TC applies)
    bool has_attr = false;
    ncclNetAttr_v11_t attr{}; // NCCL's last hints (setNetAttr), which ibex only records
};

// Everything, behind one lock: NCCL drives a comm from one proxy thread, so the lock is
// uncontended in practice and keeps close-while-busy safe.
struct Plugin {
    std::mutex mu;
    ncclDebugLogger_t logger = nullptr;
    HandleTable<ListenComm> listens{Kind::Listen, 1024};
    HandleTable<Comm> sends{Kind::SendComm, 1024};
    HandleTable<Comm> recvs{Kind::RecvComm, 1024};
    HandleTable<Memory> memory{Kind::Memory, 65536};
    HandleTable<Request> requests{Kind::Request, 16384};
    HandleTable<NetContext> contexts{Kind::Context, 4096};
};
Plugin &plugin();

// Logging through NCCL's logger (NCCL_DEBUG=INFO/WARN shows it).
void log(ncclDebugLogLevel level, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
#define IBEX_NCCL_WARN(...) ::ibex_nccl::log(NCCL_LOG_WARN, __FILE__, __LINE__, __VA_ARGS__)
#define IBEX_NCCL_INFO(...) ::ibex_nccl::log(NCCL_LOG_INFO, __FILE__, __LINE__, __VA_ARGS__)

// devices.cpp
ncclResult_t init(ncclDebugLogger_t logger);
ncclResult_t devices(int *ndev);
ncclResult_t properties(int dev, ncclNetProperties_v9_t *props);
ncclResult_t make_vdevice(int *d, ncclNetVDeviceProps_v9_t *props);
// The device's context and PD, opened on first use; nullptr (and a warning) on failure.
ibex_pd_t *device_pd(int dev, ibex_context_t **context);
// The IPv4 address a listener for `dev` binds (port 0): IBEX_NCCL_SOCKET_ADDR, else the
// device's own interface, else the first non-loopback address, else 127.0.0.1.
uint32_t device_socket_addr(int dev); // network order

// contexts.cpp: the v11+ per-communicator contexts.
ncclResult_t init_context(void **ctx, uint64_t comm_id, const ncclNetCommConfig_v11_t *config,
                          ncclDebugLogger_t logger);
ncclResult_t finalize_context(void *ctx);
bool context_valid(const void *ctx); // warns when not
ncclResult_t set_net_attr(void *ctx, const ncclNetAttr_v11_t *attr);

// The context's traffic class (-1: none); the context was checked by context_valid.
int context_traffic_class(const void *ctx);

// qp_knobs.cpp: the QP attributes from NCCL_IB_TIMEOUT, NCCL_IB_RETRY_CNT, NCCL_IB_SL and
// NCCL_IB_TC (read once; a bad value is warned about and left out), with
// `traffic_class` (a communicator's, 0..255) in place of NCCL_IB_TC.
struct QpKnobs {
    ibex_qp_attr_t attr = IBEX_QP_ATTR_INIT;
    unsigned mask = 0;
};
QpKnobs qp_knobs(int traffic_class);

// setup.cpp
ncclResult_t listen(int dev, void *handle, void **listen_comm);
// traffic_class: the communicator's (0..255), -1: none given.
ncclResult_t connect(int dev, void *handle, void **send_comm, int traffic_class);
ncclResult_t accept(void *listen_comm, void **recv_comm);
ncclResult_t close_listen(void *listen_comm);

// transfer.cpp
ncclResult_t create_comm_resources(Comm &c); // CQ, QP, control block (set-up calls it)
ncclResult_t post_control_receives(Comm &c);
void release_comm(Comm &c, void *handle);    // frees resources, fails its requests
ncclResult_t reg_mr(void *comm, void *data, size_t size, int type, void **mhandle);
ncclResult_t dereg_mr(void *comm, void *mhandle);
ncclResult_t isend(void *send_comm, void *data, size_t size, int tag, void *mhandle,
                   void **request);
ncclResult_t irecv(void *recv_comm, int n, void **data, const size_t *sizes, const int *tags,
                   void **mhandles, void **request);
ncclResult_t iflush(void *recv_comm, int n, void **request);
ncclResult_t test(void *request, int *done, int *sizes);
ncclResult_t close_send(void *send_comm);
ncclResult_t close_recv(void *recv_comm);

} // namespace ibex_nccl
