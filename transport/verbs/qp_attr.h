// ibex_modify_qp -> ibv_modify_qp: the attribute sequence an RC QP needs on RoCE v2.
// Each transition gets every attribute the verbs spec makes mandatory for it, taken
// from the caller where given and from ibex's defaults otherwise (the same defaults the
// soft provider uses), so ibex_qp_connect() works unchanged on hardware. Pure: builds an
// ibv_qp_attr and mask without touching a device.
#pragma once

#include <cstdint>

#include <infiniband/verbs.h>

#include <ibex/ibex.h>

namespace ibex::verbs {

// What the port and device contribute to a QP's attributes.
struct PortFacts {
    uint8_t port_num = 1;
    int gid_index = -1;
    ibv_mtu active_mtu = IBV_MTU_1024;
    uint8_t max_rd_atomic = 16;      // device max_qp_init_rd_atom (initiator depth)
    uint8_t max_dest_rd_atomic = 16; // device max_qp_rd_atom (responder resources)
    uint8_t sl = 0;                  // IBEX_SL: service level (VLAN PCP on RoCE)
    uint8_t hop_limit = 64;
};

// State the provider keeps per QP between modify calls.
struct QpMemory {
    ibex_qp_state_t state = IBEX_QPS_RESET;
    uint32_t initial_sq_psn = 0; // what qp_local_addr advertised
    uint8_t traffic_class = 0;   // DSCP << 2, applied at the next RTR
    int sl = -1;                 // service level for the next RTR; -1: the port's (IBEX_SL)
    uint32_t qp_num = 0;         // for error details
};

struct VerbsModify {
    ibv_qp_attr attr{};
    int mask = 0;
};

// Builds the verbs modify for (attr, mask) from mem.state. On failure returns the status
// and records the detail (runtime/status.h); nothing is changed in mem.
ibex_status_t build_modify(const ibex_qp_attr_t &a, unsigned mask, const QpMemory &mem, const PortFacts &port,
                           VerbsModify *out);
// After a successful ibv_modify_qp: what the provider now remembers.
void commit_modify(const ibex_qp_attr_t &a, unsigned mask, QpMemory *mem);

// Largest IB MTU a RoCE port carries over a netdev MTU (the RNIC reserves the RoCE v2
// headers: GRH 40 + UDP 8 + BTH 12 + the largest extension headers 32 + ICRC 4).
ibv_mtu roce_mtu_for_netdev(int netdev_mtu);

} // namespace ibex::verbs
