// The RDMA side of a perftest-style run: one context, PD and CQ, num_qps RC QPs and one
// registered buffer split into one region per QP, each QP connected to its peer QP as
// described by the peer's perftest key record.
#pragma once

#include <ibex/ibex.h>

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
    // RESET -> INIT -> RTR -> RTS of QP i towards its peer; mtu_bytes 0 keeps the device's
    // MTU; out_reads limits the READs/atomics it keeps outstanding.
    bool connect(uint32_t i, const KeyRecord &remote, int mtu_bytes, uint32_t out_reads, std::string *err);
    int path_mtu_bytes() const { return path_mtu_; }
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
    int cuda_ = -1;
    bool ibex_alloc_ = false; // buf came from ibex_mem_alloc
};

// An MTU in bytes as ibex_mtu_t (0 for an invalid value).
ibex_mtu_t mtu_enum(int bytes);

} // namespace ibex::perftest
