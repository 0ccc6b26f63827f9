// The RDMA side of a perftest-style run: one context, PD and CQ, num_qps RC QPs and one
// registered buffer split into one region per QP, each QP connected to its peer QP as
// described by the peer's perftest key record.
#pragma once

#include <ibex/ibex.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "tools/ibex_perftest/oob.h"

namespace ibex::perftest {

inline constexpr uint16_t kRoceUdpPort = 4791;

// "<what>: <status text>: <detail>" for a failed ibex call.
std::string ibex_error(const char *what, ibex_status_t st);

struct ResourceSpec {
    size_t region = 0;        // bytes per QP (page aligned by open())
    uint32_t num_qps = 1;
    uint32_t max_send_wr = 1; // per QP
    uint32_t max_recv_wr = 1; // per QP
    int numa_node = -1;       // host buffers on this node; -1: no preference
    int cuda_device = -1;     // >= 0: the buffer is GPU memory on this device
    bool ibex_alloc = true;   // host buffer from ibex_mem_alloc (shm shares it with the peer)
};

// How a QP is brought up towards its peer (the flags -m, -o, -T, -S and -u).
struct ConnectParams {
    int mtu_bytes = 0;         // the agreed MTU; 0: this port's
    uint32_t out_reads = 16;   // READs/atomics this side keeps outstanding and serves
    uint8_t traffic_class = 0; // DSCP << 2 (-T); the ECN bits are the provider's
    uint8_t timeout = 14;      // transport timeout, 4.096 us * 2^timeout (-u)
    int sl = -1;               // service level 0..7 (-S); -1: the provider's
};

// One ibex_modify_qp call of the bring-up.
struct QpStep {
    ibex_qp_attr_t attr;
    unsigned mask;
};

// RESET -> INIT -> RTR -> RTS of a QP whose own address is `local` towards `remote`, each
// attribute at the transition where verbs takes it (responder resources and the traffic
// class at RTR, the initiator depth and the timers at RTS), as perftest brings up its QPs:
// an RNIC refuses them once the QP is in RTS.
std::array<QpStep, 3> connect_steps(const ibex_ep_addr_t &local, const KeyRecord &remote, const ConnectParams &p);

// Whether --use_cuda=<id> can work in this build on this host; *err says why not.
bool cuda_usable(int device, std::string *err);

class Resources {
public:
    Resources() = default;
    ~Resources();
    Resources(const Resources &) = delete;
    Resources &operator=(const Resources &) = delete;

    // Opens the device and creates everything; the buffer is zeroed.
    bool open(const std::string &device, const ResourceSpec &spec, std::string *err);
    void close();

    // Region i of the buffer: QP i's data (its peer's writes land at region(i) + offset).
    uint8_t *region(uint32_t i) const { return buf + size_t(i) * region_len; }
    // The key record of QP i for the peer, advertising region(i) + remote_offset.
    KeyRecord local_key(uint32_t i, size_t remote_offset) const;
    // QP i through connect_steps() towards its peer.
    bool connect(uint32_t i, const KeyRecord &remote, const ConnectParams &p, std::string *err);
    int path_mtu_bytes() const { return path_mtu_; }
    // The traffic class the provider reports for the last QP connected.
    int traffic_class() const { return traffic_class_; }
    int sl() const { return sl_; }
    bool on_gpu() const { return cuda_ >= 0; }

    ibex_context_t *ctx = nullptr;
    ibex_pd_t *pd = nullptr;
    ibex_cq_t *cq = nullptr;
    std::vector<ibex_qp_t *> qps;
    std::vector<ibex_ep_addr_t> local;
    ibex_mr_t *mr = nullptr;
    uint8_t *buf = nullptr;
    size_t buf_len = 0;
    size_t region_len = 0;

private:
    int path_mtu_ = 0;
    int traffic_class_ = 0;
    int sl_ = 0;
    int cuda_ = -1;
    bool ibex_alloc_ = false; // buf came from ibex_mem_alloc
};

// An MTU in bytes as ibex_mtu_t (0 for an invalid value).
ibex_mtu_t mtu_enum(int bytes);

} // namespace ibex::perftest
