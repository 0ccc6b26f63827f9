#include "transport/soft/dpdk/memif_unmap_guard.h"

#include <cstring>
#include <elf.h>
#include <iterator>
#include <link.h>
#include <linux/membarrier.h>
#include <mutex>
#include <sched.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "runtime/base/log.h"
#include "transport/soft/dpdk/ethdev_io.h"

namespace ibex::soft::dpdk {
namespace {

constexpr int kSlots = 128; // threads bursting at once on memif ports in one process
BurstSlot g_slots[kSlots];
std::atomic<uint32_t> g_unslotted{0};
thread_local BurstSlot *t_slot = nullptr; // trivial, so the hook can read it without claiming

struct SlotClaim {
    BurstSlot *slot = nullptr;
    SlotClaim() {
        for (BurstSlot &s : g_slots) {
            bool free = false;
            if (s.taken.compare_exchange_strong(free, true)) {
                slot = &s;
                break;
            }
        }
        t_slot = slot;
    }
    ~SlotClaim() {
        t_slot = nullptr;
        if (slot) slot->taken.store(false, std::memory_order_release); // seq is even: no burst runs
    }
};

// Spins politely (the bursting thread may share this CPU) until done() or the limit.
template <class Done> bool wait_until(Done done, uint64_t deadline) {
    for (uint32_t i = 0; !done(); ++i) {
        if (i < 64) continue;
        if ((i & 63) == 0 && now_ns() > deadline) return false;
        sched_yield();
    }
    return true;
}

int guarded_munmap(void *addr, size_t len) {
    wait_out_running_bursts();
    return ::munmap(addr, len);
}

// The disconnect also closes the queues' interrupt eventfds, which a burst past its check
// may still read or kick: waiting here keeps that descriptor number from being reused
// under it (a kick written into whatever the process opened next).
int guarded_close(int fd) {
    wait_out_running_bursts();
    return ::close(fd);
}

struct Import {
    const char *symbol;
    void *replacement;
    void **slot = nullptr; // where the shared object's GOT holds its address (PLT or direct)
};

struct GotSearch {
    const char *object; // a substring of the shared object's path
    Import *imports;
    size_t count;
    uintptr_t relro_begin = 0, relro_end = 0; // page-aligned, as ld.so protected it
    bool object_found = false;
};

uintptr_t dyn_address(ElfW(Addr) base, ElfW(Addr) ptr) { return ptr < base ? base + ptr : ptr; }

int find_got_slots(dl_phdr_info *info, size_t, void *arg) {
    auto *s = static_cast<GotSearch *>(arg);
    if (!info->dlpi_name || !std::strstr(info->dlpi_name, s->object)) return 0;
    s->object_found = true;
    const ElfW(Addr) base = info->dlpi_addr;
    const ElfW(Dyn) *dyn = nullptr;
    const uintptr_t page = uintptr_t(sysconf(_SC_PAGESIZE));
    for (int i = 0; i < info->dlpi_phnum; ++i) {
        const ElfW(Phdr) &ph = info->dlpi_phdr[i];
        if (ph.p_type == PT_DYNAMIC) dyn = reinterpret_cast<const ElfW(Dyn) *>(base + ph.p_vaddr);
        if (ph.p_type == PT_GNU_RELRO) {
            s->relro_begin = (base + ph.p_vaddr) & ~(page - 1);
            s->relro_end = (base + ph.p_vaddr + ph.p_memsz) & ~(page - 1);
        }
    }
    if (!dyn) return 1;
    const ElfW(Sym) *symtab = nullptr;
    const char *strtab = nullptr;
    const ElfW(Rela) *tables[2] = {nullptr, nullptr};
    size_t sizes[2] = {0, 0};
    for (; dyn->d_tag != DT_NULL; ++dyn) {
        switch (dyn->d_tag) {
        case DT_SYMTAB: symtab = reinterpret_cast<const ElfW(Sym) *>(dyn_address(base, dyn->d_un.d_ptr)); break;
        case DT_STRTAB: strtab = reinterpret_cast<const char *>(dyn_address(base, dyn->d_un.d_ptr)); break;
        case DT_JMPREL: tables[0] = reinterpret_cast<const ElfW(Rela) *>(dyn_address(base, dyn->d_un.d_ptr)); break;
        case DT_PLTRELSZ: sizes[0] = dyn->d_un.d_val; break;
        case DT_RELA: tables[1] = reinterpret_cast<const ElfW(Rela) *>(dyn_address(base, dyn->d_un.d_ptr)); break;
        case DT_RELASZ: sizes[1] = dyn->d_un.d_val; break;
        default: break;
        }
    }
    if (!symtab || !strtab) return 1;
    for (int t = 0; t < 2; ++t) {
        for (size_t k = 0; tables[t] && k < sizes[t] / sizeof(ElfW(Rela)); ++k) {
            const ElfW(Rela) &r = tables[t][k];
            const auto type = ELF64_R_TYPE(r.r_info);
            if (type != R_X86_64_JUMP_SLOT && type != R_X86_64_GLOB_DAT) continue;
            const char *name = strtab + symtab[ELF64_R_SYM(r.r_info)].st_name;
            for (size_t i = 0; i < s->count; ++i)
                if (!s->imports[i].slot && std::strcmp(name, s->imports[i].symbol) == 0)
                    s->imports[i].slot = reinterpret_cast<void **>(base + r.r_offset);
        }
    }
    return 1;
}

// Writes the replacement into the slot, lifting RELRO's read-only protection for the moment.
bool patch_slot(const GotSearch &s, const Import &im) {
    const uintptr_t page_size = uintptr_t(sysconf(_SC_PAGESIZE));
    const uintptr_t page = reinterpret_cast<uintptr_t>(im.slot) & ~(page_size - 1);
    const bool relro = page >= s.relro_begin && page < s.relro_end;
    if (relro && mprotect(reinterpret_cast<void *>(page), page_size, PROT_READ | PROT_WRITE) != 0) return false;
    __atomic_store_n(im.slot, im.replacement, __ATOMIC_RELEASE);
    if (relro) mprotect(reinterpret_cast<void *>(page), page_size, PROT_READ);
    return true;
}

} // namespace

std::atomic<bool> g_remote_burst_fence{false};

bool use_remote_burst_fence() {
    static const bool registered = [] {
        const long cmds = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
        return cmds > 0 && (cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED) &&
               syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
    }();
    if (registered) g_remote_burst_fence.store(true);
    return registered;
}

BurstSlot *this_thread_burst_slot() {
    if (t_slot) [[likely]]
        return t_slot;
    thread_local SlotClaim claim;
    return claim.slot;
}

void enter_unslotted_burst() { g_unslotted.fetch_add(1, std::memory_order_seq_cst); }
void leave_unslotted_burst() { g_unslotted.fetch_sub(1, std::memory_order_release); }

void wait_out_running_bursts() {
    // Pairs with MemifBurst's store: either a burst's slot reads odd here, or that burst
    // reads the device flags the caller cleared before calling. With the remote fence,
    // every thread of the process has passed a full barrier when membarrier returns.
    if (!burst_fence_is_remote() || syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) != 0)
        std::atomic_thread_fence(std::memory_order_seq_cst);
    const uint64_t deadline = now_ns() + kBurstWaitLimitNs;
    bool all_ended = true;
    for (BurstSlot &s : g_slots) {
        if (&s == t_slot || !s.taken.load(std::memory_order_acquire)) continue;
        const uint64_t seq = s.seq.load(std::memory_order_acquire);
        if (!(seq & 1)) continue;
        all_ended &= wait_until([&] { return s.seq.load(std::memory_order_acquire) != seq; }, deadline);
    }
    // Bursts without a slot: wait for a moment when none runs.
    all_ended &= wait_until([] { return g_unslotted.load(std::memory_order_acquire) == 0; }, deadline);
    if (!all_ended)
        IBEX_LOG(warn, "dpdk: a memif burst still ran after %llu ms; unmapping the link's regions anyway",
                 (unsigned long long)(kBurstWaitLimitNs / 1000000));
}

bool install_memif_unmap_guard() {
    static std::once_flag once;
    static bool installed = false;
    std::call_once(once, [] {
        Import imports[] = {{"munmap", reinterpret_cast<void *>(&guarded_munmap)},
                            {"close", reinterpret_cast<void *>(&guarded_close)}};
        GotSearch s{"librte_net_memif", imports, std::size(imports)};
        dl_iterate_phdr(&find_got_slots, &s);
        if (!s.object_found) {
            IBEX_LOG(info, "dpdk: the memif PMD is not a loaded shared object: a killed memif peer can still crash "
                           "this process mid-burst");
            return;
        }
        // munmap is what crashes; close only narrows a rarer race, so it is not required.
        if (!imports[0].slot || !patch_slot(s, imports[0])) {
            IBEX_LOG(warn, "dpdk: could not route the memif PMD's munmap through the burst guard: a killed memif "
                           "peer can still crash this process mid-burst");
            return;
        }
        if (imports[1].slot) patch_slot(s, imports[1]);
        installed = true;
        use_remote_burst_fence();
        IBEX_LOG(debug, "dpdk: the memif PMD's munmap%s wait for running bursts (%s)", imports[1].slot ? " and close" : "",
                 burst_fence_is_remote() ? "membarrier" : "seq_cst bursts");
    });
    return installed;
}

} // namespace ibex::soft::dpdk
