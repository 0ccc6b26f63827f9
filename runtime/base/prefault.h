// Page-table warm-up: memory that a transport copies into or out of on its hot path gets
// its pages mapped ahead, as an RNIC's registration pins them, instead of taking a page
// fault per 4 KiB page at its first packets (on this VM a fault costs microseconds, and
// the first laps of an 8-byte ping-pong through fresh ring slots ran at several times the
// round trip of the later ones).
#pragma once

#include <cstddef>

namespace ibex::base {

// Maps the pages of [addr, addr + len) for writing, keeping their contents
// (MADV_POPULATE_WRITE); false where the kernel cannot (before Linux 5.14, memory that is
// not ordinary process memory), which only costs speed.
bool prefault_range(void *addr, size_t len);

} // namespace ibex::base
