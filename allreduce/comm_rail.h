// One NIC per rail: IBEX_DEVICE=rail (or a config's device "rail") lets each rank open
// the NIC that ibex_topo_bind gives its local rank, so the ranks of a host cross the
// network on as many NICs as the host has, each from its own GPU's (or cores') side.
#pragma once

#include <ibex/ibex.h>

#include <string>

namespace ibex::coll {

// "rail", "rail:udp" or "rail:verbs".
bool is_rail_device(const std::string &spec);

// The device this local rank opens for `spec`: the RDMA device of its bound NIC where the
// verbs provider lists it ("rail", "rail:verbs"), else the soft provider on the NIC's
// netdev ("udp:<netdev>", with UDP port 4791 + local_rank when ranks share the host).
// Reads the topology of IBEX_TOPO_FILE, else of this machine; IBEX_NIC narrows the NICs.
ibex_status_t rail_device(const std::string &spec, int local_rank, int local_size, std::string *device);

} // namespace ibex::coll
