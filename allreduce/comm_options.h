// A communicator's settings: what ibex_comm_config_t asks for, else the IBEX_* environment,
// else the defaults below.
#pragma once

#include <string>

#include <ibex/coll.h>

#include "allreduce/executor.h"
#include "allreduce/selector.h"
#include "allreduce/sumsrv_client.h"

namespace ibex::coll {

struct CommOptions {
    std::string device;
    bool device_defaulted = false; // neither config->device nor IBEX_DEVICE: the first listed
    int timeout_ms = 30000;
    bool forced = false;
    Algo algo = Algo::ring;
    ExecutorParams exec;
    // IBEX_COMM_SLICE was given; else the slice follows the devices' message costs
    // (comm_slice_bytes), and the ranks agree on one at creation.
    bool slice_given = false;
    bool slots_given = false; // IBEX_COMM_SLOTS was given; else comm_staging_slots
    int spin_us = 50;       // the progress thread's busy-poll after the last movement
    int wait_spin_us = -1;  // a waiting caller's; -1: 10 ms when this host's ranks fit its cores, else
                            // 2 ms (at least spin_us) where the ranks span hosts, else spin_us
    int handover_us = 200;  // the thread's pause after a caller hands the stream back
    bool own_core = false;  // every rank of this host can have a core (set at creation)
    bool probe = true;
    // ibex_comm_config_t.qp_attr: what every QP of the communicator is connected with
    // (checked; qp_attr_mask 0: ibex's defaults).
    QpChoice qp;
    size_t gpu_chunk_bytes = 4 << 20; // GPU buffers are staged and reduced in chunks of this size
    // IBEX_BIGRAPH_HOSTS_PER_SWITCH: the ranks sit on EFLOPS's BiGraph, numbered as
    // bigraph_alternating says, this many on each switch; rhd then runs with the BiGraph
    // mapping (0: not a BiGraph). IBEX_ALGO=bigraph forces rhd and requires the mapping.
    int bigraph_per_switch = 0;
    bool bigraph_required = false;
    // IBEX_SUMSRV and friends: the summation servers this communicator reaches (none: the
    // sumsrv algorithm is plain allreduce).
    SumsrvSettings sumsrv;
};

// Reads config (may be NULL) and IBEX_* variables.
ibex_status_t comm_options(const ibex_comm_config_t *config, CommOptions *out);

// The slice a communicator uses by default, given the longest efficient message
// (ibex_device_attr_t::efficient_msg_bytes) of the devices its peers are reached through
// (0: none said): 128 KiB, or that length where it is longer (512 KiB on the udp port).
size_t comm_slice_bytes(uint64_t device_efficient);
// Staging slots per peer for slices of slice_bytes: 1 MiB of them, two to eight.
int comm_staging_slots(size_t slice_bytes);

} // namespace ibex::coll
