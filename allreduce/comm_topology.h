// Where a communicator's ranks run: the host identity each rank announces at creation, the
// host layout it gives, and which peers are reached over the shm device.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <ibex/coll.h>

#include "allreduce/algorithms/algorithms.h"

namespace ibex::coll {

// hostname, boot id and network-namespace inode, so ranks in different network namespaces
// of one machine count as different hosts; IBEX_HOST_ID overrides it.
std::string host_identity();

// `name` is in this process's device list (a built-in provider, an RDMA device verbs sees).
bool device_listed(const char *name);

// The shared-memory provider's device name.
inline constexpr const char *kShmDevice = "shm";

// The device reaches only this machine: soft on a loopback interface ("udp:lo"), or shm.
bool device_is_local_only(const std::string &name);

// The first device of this process's list that `wanted` accepts ("" when none does).
std::string first_listed_device(const std::function<bool(const std::string &)> &wanted);

// Where the communicator spans several hosts: a defaulted device that reaches only this
// machine (the first listed is usually udp:lo) is replaced by the first listed device that
// does not, as NCCL skips loopback when it picks its interface; a device named so (config
// or IBEX_DEVICE) is an error. Ranks sharing a host on a soft udp device that names no
// port take 4791 + local rank. With IBEX_HOST_ID (hosts that may be names on one machine)
// the device is left as it is.
ibex_status_t choose_device_for_hosts(ibex_comm *c);

// The soft udp device for one of several ranks sharing a host: "udp:<if>" with UDP port
// 4791 + local_rank, so each binds its own (RoCEv2's port for local rank 0).
std::string udp_device_for_local_rank(const std::string &udp_device, int local_rank);

struct Topology {
    HostLayout layout;
    std::vector<uint8_t> local; // per rank: a peer of this host, reached over shm
    bool shm = false;           // some peer is reached over shm
    std::string irregular;      // why the hierarchical algorithms do not apply (empty: they do)
};

// Collective over the communicator's bootstrap. A pair of ranks uses shm when both are on
// one host and both want it (IBEX_SHM, default on; the shm provider is built in, or is the
// communicator's own device).
ibex_status_t learn_topology(ibex_comm *c, Topology *out);

} // namespace ibex::coll
