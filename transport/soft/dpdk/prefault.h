// Page-table warm-up for the memory a dpdk port touches per packet. Without hugepages
// (--no-huge) that memory is 4 KiB pages of shared memfds mapped on first touch: memif's
// ring buffers and the port's mbuf pools. The first pass over a 2048-slot memif ring then
// costs a page fault per buffer on both sides, and a 2-byte ping-pong ran at ~5 us for
// its first ~2000 round trips instead of ~0.6 us (perftest's default of 1000 iterations
// never left that phase). Prefaulting (runtime/base/prefault.h) keeps the contents as they
// are, so it is safe while the peer uses the memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

struct rte_mempool;

namespace ibex::soft::dpdk {

// The memif regions this process has mapped (its own and its peers'), by the inode of
// their memfd: a connection's regions are one memfd per region, mapped by both ends.
std::vector<uint64_t> memif_region_inodes();

// Prefaults every memif region this process has mapped; bytes covered. The regions'
// inodes go to *inodes when given.
size_t prefault_memif_regions(std::vector<uint64_t> *inodes = nullptr);

// The memory chunks of a mempool; bytes covered.
size_t prefault_mempool(rte_mempool *pool);

} // namespace ibex::soft::dpdk
