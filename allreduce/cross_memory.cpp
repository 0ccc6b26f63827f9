#include "allreduce/cross_memory.h"

#include <sys/uio.h>

#include <cerrno>

#include "runtime/base/status.h"

namespace ibex::coll {

bool peer_word_is(int pid, uint64_t addr, uint64_t value) {
    uint64_t got = 0;
    iovec loc{&got, sizeof got}, rem{reinterpret_cast<void *>(addr), sizeof got};
    return process_vm_readv(pid, &loc, 1, &rem, 1, 0) == sizeof got && got == value;
}

ibex_status_t cross_copy(int pid, void *local, uint64_t remote, size_t bytes, bool write, int rank, const char *what) {
    auto *p = static_cast<uint8_t *>(local);
    while (bytes) {
        iovec loc{p, bytes}, rem{reinterpret_cast<void *>(remote), bytes};
        const ssize_t moved = write ? process_vm_writev(pid, &loc, 1, &rem, 1, 0) : process_vm_readv(pid, &loc, 1, &rem, 1, 0);
        if (moved <= 0)
            return fail_errno(IBEX_ERR_REMOTE, moved < 0 ? errno : EIO, "%s rank %d's %s at 0x%llx (%zu bytes) failed",
                              write ? "writing" : "reading", rank, what, static_cast<unsigned long long>(remote), bytes);
        p += moved;
        remote += static_cast<uint64_t>(moved);
        bytes -= static_cast<size_t>(moved);
    }
    return IBEX_OK;
}

} // namespace ibex::coll
