// A memcpy whose stores go to memory rather than into this core's cache, for data that
// another process reads next, on another core.
#pragma once

#include <cstddef>

namespace ibex::coll {

// Copies bytes from src to dst (no overlap) with non-temporal stores where the CPU has
// them, then fences them: everything is globally visible before a later store (the fast-
// box word that tells a peer to read) is. Why: a line this core just wrote sits dirty in
// its cache, and a peer on another core (on a VM, another L3, or another socket) pulls it
// line by line through the coherence protocol. Measured on this VM, a 2-rank staged
// allreduce ran at 1.6-2.1 GB/s busbw in half of the runs with plain stores and at 7-10
// with these, at 256 KiB-4 MiB; the peer then reads DRAM, which streams.
void copy_bypassing_cache(void *dst, const void *src, size_t bytes);

} // namespace ibex::coll
