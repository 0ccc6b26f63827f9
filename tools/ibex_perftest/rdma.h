// The RDMA side of a perftest-style run: one context, PD, CQ, RC QP and one registered
// buffer, connected to the peer described by its perftest key record.
#pragma once

#include <ibex/ibex.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "ibex_perftest/oob.h"

namespace ibex::perftest {

inline constexpr uint16_t kRoceUdpPort = 4791;

// "<what>: <status text>: <detail>" for a failed ibex call.
std::string ibex_error(const char *what, ibex_status_t st);

class Resources {
public:
    Resources() = default;
    ~Resources();
    Resources(const Resources &) = delete;
    Resources &operator=(const Resources &) = delete;

    // Opens the device and creates everything; buf_len bytes, page aligned, zeroed.
    bool open(const std::string &device, size_t buf_len, uint32_t max_send_wr, std::string *err);
    void close();

    // The key record the peer needs to write into [buf + remote_offset, ...).
    KeyRecord local_key(size_t remote_offset) const;
    // RESET -> INIT -> RTR -> RTS towards the peer; mtu_bytes 0 keeps the device's MTU.
    bool connect(const KeyRecord &remote, int mtu_bytes, std::string *err);
    int path_mtu_bytes() const { return path_mtu_; }

    ibex_context_t *ctx = nullptr;
    ibex_pd_t *pd = nullptr;
    ibex_cq_t *cq = nullptr;
    ibex_qp_t *qp = nullptr;
    ibex_mr_t *mr = nullptr;
    uint8_t *buf = nullptr;
    size_t buf_len = 0;
    ibex_ep_addr_t local{};

private:
    int path_mtu_ = 0;
};

// An MTU in bytes as ibex_mtu_t (0 for an invalid value).
ibex_mtu_t mtu_enum(int bytes);

} // namespace ibex::perftest
