// Reading and writing another process's memory of this host (cross-memory attach:
// process_vm_readv/writev), as the direct path and the mailboxes do: one copy, no shared
// mapping, allowed where the ptrace scope, the user and the PID namespace allow it.
#pragma once

#include <cstddef>
#include <cstdint>

#include <ibex/ibex.h>

namespace ibex::coll {

// The word at `addr` in process `pid` reads `value` (so this process may read its memory).
bool peer_word_is(int pid, uint64_t addr, uint64_t value);

// Moves `bytes` between this process's `local` and `remote` in process `pid` (write: into
// it), in as many calls as the kernel needs. A failure names rank `rank`'s `what` ("send
// buffer") and the errno, as IBEX_ERR_REMOTE.
ibex_status_t cross_copy(int pid, void *local, uint64_t remote, size_t bytes, bool write, int rank, const char *what);

} // namespace ibex::coll
