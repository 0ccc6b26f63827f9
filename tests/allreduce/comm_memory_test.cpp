// Collective buffers from ibex_comm_mem_alloc (allreduce/comm_memory.h), on forked ranks of
// one host: every collective, type and op, in place and out of place, on such buffers
// gives the bits it gives on heap buffers, staged and through process_vm_*; the peers
// reached them through mappings, and no rank staged its input. A rank whose buffers are
// heap memory takes part beside ranks whose buffers are shared. The calls refuse what is
// not theirs, and freeing drops the communicator's registrations of the memory.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#include "allreduce/comm.h"
#include "tests/allreduce/matrix/matrix.h"
#include "tests/allreduce/ranks.h"

namespace {

using ibex::test::init_host_comm;
using ibex::test::RankCtx;
using namespace ibex::test::matrix;

// The smallest count per rank that takes the direct path (4 KiB and one byte of buffer,
// and for reduce-scatter and allgather more per rank than the fast boxes' 4 KiB), and an
// odd count.
std::vector<size_t> counts_of(Coll coll, ibex_datatype_t type, size_t n) {
    const size_t e = ibex_datatype_size(type);
    const size_t share = coll == Coll::reduce_scatter || coll == Coll::allgather ? n : 1;
    size_t first = ((4097 + e - 1) / e + share - 1) / share;
    if (share > 1) first = std::max(first, 4096 / e + 1);
    return {first, size_t(100003) / share};
}

// Every combination on heap buffers (staged), and on shared buffers: staged, and through
// mappings where process_vm_* would run (a communicator without staging). `mixed`: rank 1
// keeps heap buffers in the shared runs.
int same_bits_body(RankCtx &ctx, bool mixed) {
    ibex_comm_t *staged = nullptr, *attach = nullptr;
    RANK_CHECK_OK(ctx, init_host_comm(ctx, &staged));
    ::setenv("IBEX_SHM_STAGE_BYTES", "0", 1);
    RANK_CHECK_OK(ctx, ibex_comm_split(staged, 0, ctx.rank, &attach));
    ::unsetenv("IBEX_SHM_STAGE_BYTES");
    RANK_CHECK(ctx, staged->direct.stage_bytes() > 0 && attach->direct.enabled() && attach->direct.stage_bytes() == 0,
               "staging %zu and %zu bytes", staged->direct.stage_bytes(), attach->direct.stage_bytes());
    const Buffers shared = mixed && ctx.rank == 1 ? Buffers::heap : Buffers::comm_memory;
    const size_t n = static_cast<size_t>(ctx.nranks);
    int id = 0, failures = 0;
    uint64_t combos = 0, staged_in_heap = 0;
    for (Coll coll : {Coll::allreduce, Coll::reduce_scatter, Coll::allgather, Coll::broadcast, Coll::reduce}) {
        for (int ty = 0; ty < IBEX_DATATYPE_COUNT && !failures; ++ty) {
            const auto type = static_cast<ibex_datatype_t>(ty);
            for (int op = 0; op < (reduces(coll) ? IBEX_REDOP_COUNT : 1) && !failures; ++op) {
                for (size_t count : counts_of(coll, type, n)) {
                    for (bool in_place : {false, true}) {
                        const Combo c{id++, coll, type, static_cast<ibex_redop_t>(op), count, id % ctx.nranks};
                        std::vector<uint8_t> heap, mapped_staged, mapped_attach;
                        const uint64_t in_before = staged->direct.staged_in();
                        if (!run_combo(ctx, staged, c, in_place, &heap, Buffers::heap)) {
                            ++failures;
                            break;
                        }
                        staged_in_heap += staged->direct.staged_in() - in_before;
                        const uint64_t in_shared = staged->direct.staged_in();
                        if (!run_combo(ctx, staged, c, in_place, &mapped_staged, shared) ||
                            !run_combo(ctx, attach, c, in_place, &mapped_attach, shared)) {
                            ++failures;
                            break;
                        }
                        ++combos;
                        // A rank whose send buffer is shared never stages it.
                        RANK_CHECK(ctx, shared == Buffers::heap || staged->direct.staged_in() == in_shared,
                                   "%s %s: staged its shared input", name(coll), ibex_datatype_name(type));
                        RANK_CHECK(ctx, heap == mapped_staged && heap == mapped_attach,
                                   "%s %s %s count %zu %s: heap, shared staged and shared direct buffers differ (%d %d)",
                                   name(coll), ibex_datatype_name(type), ibex_redop_name(c.op), count,
                                   in_place ? "in place" : "out of place", heap == mapped_staged, heap == mapped_attach);
                    }
                }
            }
        }
    }
    RANK_CHECK(ctx, !failures, "a collective failed");
    // Every shared run reached some peer's buffer through a mapping: rank 1's heap buffers
    // are no peer's to map, but the others' are rank 1's.
    RANK_CHECK(ctx, staged->direct.mapped() == combos && attach->direct.mapped() == combos,
               "mappings used in %llu (staged) and %llu (direct) of %llu collectives",
               static_cast<unsigned long long>(staged->direct.mapped()),
               static_cast<unsigned long long>(attach->direct.mapped()), static_cast<unsigned long long>(combos));
    RANK_CHECK(ctx, staged_in_heap > 0, "heap buffers were never staged");
    RANK_CHECK_OK(ctx, ibex_comm_destroy(attach));
    RANK_CHECK_OK(ctx, ibex_comm_destroy(staged));
    return 0;
}

TEST(CommMemory, SharedBuffersGiveTheBitsOfHeapBuffers) {
    ibex::test::expect_all_passed(ibex::test::run_ranks(3, [](RankCtx &ctx) { return same_bits_body(ctx, false); }, 200));
}

TEST(CommMemory, ARankWithHeapBuffersTakesPartBesideSharedOnes) {
    ibex::test::expect_all_passed(ibex::test::run_ranks(3, [](RankCtx &ctx) { return same_bits_body(ctx, true); }, 200));
}

// Two ranks, 1 MiB allreduces in a loop on the same shared buffers (the reuse the staged
// design guards against): every result right, in place and not.
TEST(CommMemory, ReusedSharedBuffersStayRight) {
    ibex::test::expect_all_passed(ibex::test::run_ranks(
        2,
        [](RankCtx &ctx) {
            ibex_comm_t *comm = nullptr;
            RANK_CHECK_OK(ctx, init_host_comm(ctx, &comm));
            constexpr size_t kCount = 1 << 18;
            void *s = nullptr, *r = nullptr;
            RANK_CHECK_OK(ctx, ibex_comm_mem_alloc(comm, kCount * sizeof(float), &s));
            RANK_CHECK_OK(ctx, ibex_comm_mem_alloc(comm, kCount * sizeof(float), &r));
            auto *x = static_cast<float *>(s), *y = static_cast<float *>(r);
            for (int it = 0; it < 50; ++it) {
                const bool in_place = it % 2;
                for (size_t i = 0; i < kCount; ++i) x[i] = static_cast<float>((it + 1) * (ctx.rank + 1) + int(i % 7));
                RANK_CHECK_OK(ctx, ibex_allreduce(x, in_place ? x : y, kCount, IBEX_F32, IBEX_SUM, comm, nullptr));
                const float *out = in_place ? x : y;
                for (size_t i = 0; i < kCount; ++i) {
                    const float want = static_cast<float>(3 * (it + 1) + 2 * int(i % 7));
                    RANK_CHECK(ctx, out[i] == want, "iteration %d, element %zu: %g, want %g", it, i,
                               static_cast<double>(out[i]), static_cast<double>(want));
                }
            }
            RANK_CHECK(ctx, comm->direct.mapped() == 50 && comm->direct.staged_in() == 0,
                       "mapped in %llu of 50, staged in %llu", static_cast<unsigned long long>(comm->direct.mapped()),
                       static_cast<unsigned long long>(comm->direct.staged_in()));
            RANK_CHECK_OK(ctx, ibex_comm_mem_free(comm, s));
            RANK_CHECK_OK(ctx, ibex_comm_mem_free(comm, r));
            RANK_CHECK_OK(ctx, ibex_comm_destroy(comm));
            return 0;
        },
        60));
}

TEST(CommMemory, CallsRefuseWhatIsNotTheirs) {
    ibex::test::expect_all_passed(ibex::test::run_ranks(
        2,
        [](RankCtx &ctx) {
            ibex_comm_t *comm = nullptr;
            RANK_CHECK_OK(ctx, init_host_comm(ctx, &comm));
            void *p = nullptr;
            RANK_CHECK(ctx, ibex_comm_mem_alloc(comm, 0, &p) == IBEX_ERR_INVALID_ARGUMENT, "0 bytes accepted");
            RANK_CHECK(ctx, ibex_comm_mem_alloc(nullptr, 64, &p) == IBEX_ERR_INVALID_ARGUMENT, "NULL comm accepted");
            RANK_CHECK(ctx, ibex_comm_mem_alloc(comm, 64, nullptr) == IBEX_ERR_INVALID_ARGUMENT, "NULL out accepted");
            std::vector<uint8_t> heap(64);
            RANK_CHECK(ctx, ibex_comm_mem_free(comm, heap.data()) == IBEX_ERR_INVALID_ARGUMENT &&
                                std::strstr(ibex_last_error(), "not from ibex_comm_mem_alloc"),
                       "heap memory freed: %s", ibex_last_error());
            RANK_CHECK_OK(ctx, ibex_comm_mem_alloc(comm, 1 << 16, &p));
            std::memset(p, 1, 1 << 16); // usable memory
            // An interior pointer is not an allocation.
            RANK_CHECK(ctx, ibex_comm_mem_free(comm, static_cast<uint8_t *>(p) + 64) == IBEX_ERR_INVALID_ARGUMENT,
                       "an interior pointer freed");
            // Freeing drops the user's own registration of it too.
            RANK_CHECK_OK(ctx, ibex_comm_register(comm, p, 1 << 16));
            RANK_CHECK_OK(ctx, ibex_comm_mem_free(comm, p));
            RANK_CHECK(ctx, ibex_comm_deregister(comm, p) == IBEX_ERR_INVALID_ARGUMENT, "registration outlived the memory");
            RANK_CHECK(ctx, ibex_comm_mem_free(comm, p) == IBEX_ERR_INVALID_ARGUMENT, "freed twice");
            // Left for ibex_comm_destroy to free.
            RANK_CHECK_OK(ctx, ibex_comm_mem_alloc(comm, 4096, &p));
            RANK_CHECK_OK(ctx, ibex_comm_destroy(comm));
            return 0;
        },
        60));
}

// Without same-host peers over shm it is plain memory, and collectives on it still run.
TEST(CommMemory, PlainMemoryWithoutTheShmPath) {
    ibex::test::expect_all_passed(ibex::test::run_ranks(
        2,
        [](RankCtx &ctx) {
            ::setenv("IBEX_SHM", "0", 1);
            ibex_comm_t *comm = nullptr;
            RANK_CHECK_OK(ctx, init_host_comm(ctx, &comm));
            RANK_CHECK(ctx, comm->direct.shared_pd() == nullptr, "a shared PD without shm");
            void *p = nullptr;
            RANK_CHECK_OK(ctx, ibex_comm_mem_alloc(comm, 1 << 20, &p));
            auto *x = static_cast<float *>(p);
            for (size_t i = 0; i < (1 << 18); ++i) x[i] = 1.0f;
            RANK_CHECK_OK(ctx, ibex_allreduce(x, x, 1 << 18, IBEX_F32, IBEX_SUM, comm, nullptr));
            RANK_CHECK(ctx, x[0] == 2.0f && x[(1 << 18) - 1] == 2.0f, "sum %g", static_cast<double>(x[0]));
            RANK_CHECK_OK(ctx, ibex_comm_mem_free(comm, p));
            RANK_CHECK_OK(ctx, ibex_comm_destroy(comm));
            return 0;
        },
        60));
}

} // namespace
