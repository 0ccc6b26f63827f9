// Where an ibex process group starts: its ranks meet through the c10d::Store torch hands
// the backend, and rank 0's ibex unique id and device choice reach every rank there.
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <string>

#include <ibex/coll.h>

namespace ibex_torch {

struct Rendezvous {
    ibex_unique_id_t id{};
    std::string device; // empty: each rank's own default (IBEX_DEVICE, else the first listed)
};

// Every rank publishes its host name; rank 0 opens ibex's listener, picks the device for
// everyone (its IBEX_DEVICE, else `shm` when all ranks share its host, else each rank's
// default) and publishes that with its id and world size; every rank checks what it was
// told against that. Keys carry this rank's count of process groups made on this store,
// so a store reused for a second group never hands out a stale id. Raises (refuse) on a
// timeout or a world size that differs from rank 0's.
Rendezvous exchange_unique_id(c10d::Store &store, int rank, int size, std::chrono::milliseconds timeout);

} // namespace ibex_torch
