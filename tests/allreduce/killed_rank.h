// Test helper: a rank SIGKILLed in the middle of a large allreduce must surface as an
// error on every other rank well within the timeout (tests/allreduce/failure_test.cpp on
// one host, tests/allreduce/hierarchical_test.cpp across network namespaces); and the
// pieces other killed-rank tests share (the fast boxes, the direct path).
#pragma once

#include <sys/mman.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <functional>
#include <thread>
#include <vector>

#include "tests/allreduce/ranks.h"

namespace ibex::test {

// The victim's end: waits until all ranks counted themselves in `ready` (they are past
// their warm-up), then pause_ms more (the others are inside the collective by then), and
// SIGKILLs its own process.
inline void die_when_all_ready(const RankCtx &ctx, std::atomic<int> *ready, int pause_ms) {
    for (int i = 0; i < 10000 && ready->load() < ctx.nranks; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    std::this_thread::sleep_for(std::chrono::milliseconds(pause_ms));
    ::raise(SIGKILL);
}

// Runs n forked ranks of body(ctx, ready), `ready` shared by all of them, and expects the
// victim to die by SIGKILL and every other rank to pass; prints the ranks' output, each
// line after `label`.
inline void run_with_victim(int n, int victim, const std::function<int(RankCtx &, std::atomic<int> *)> &body,
                            const char *label = "") {
    void *shared = ::mmap(nullptr, sizeof(std::atomic<int>), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(shared, MAP_FAILED);
    auto *ready = new (shared) std::atomic<int>(0);
    auto out = ibex::test::run_ranks(n, [&](RankCtx &ctx) { return body(ctx, ready); }, 60);
    ::munmap(shared, sizeof(std::atomic<int>));
    for (int r = 0; r < n; ++r) {
        if (!out[r].text.empty()) std::printf("%s%s", label, out[r].text.c_str());
        if (r == victim) {
            EXPECT_EQ(out[r].code, 256 + SIGKILL) << label << out[r].text;
            continue;
        }
        EXPECT_EQ(out[r].code, 0) << label << "rank " << r << ": " << ibex::test::ChildProcess::describe(out[r].code)
                                  << "\n"
                                  << out[r].text;
    }
}

// Creates a rank's communicator (default: init_comm on the default device).
using InitComm = std::function<ibex_status_t(RankCtx &, ibex_comm_t **, int timeout_ms)>;

// The victim starts a large allreduce and is SIGKILLed a moment later; the others must
// fail well before the (long) timeout, and stay failed.
// warmed_up: shared by the forked ranks, counts those past the first allreduce; the victim
// dies only after all of them are, so none can lose the first one to the kill.
// device_buf: kKilledCount floats of GPU memory to reduce instead of host memory.
// victim_joins false: the victim dies before it starts the allreduce, for a path that could
// finish 16 MiB before the kill (the GPU's mapped collectives take tens of microseconds).
constexpr size_t kKilledCount = 4 << 20; // 16 MiB: still moving when the victim dies
inline int killed_body(RankCtx &ctx, int victim, std::atomic<int> *warmed_up, const InitComm &init,
                       float *device_buf = nullptr, bool victim_joins = true) {
    constexpr int kTimeoutMs = 20000;
    ibex_comm_t *comm = nullptr;
    RANK_CHECK_OK(ctx, init ? init(ctx, &comm, kTimeoutMs) : init_comm(ctx, &comm, kTimeoutMs));
    std::vector<float> host(device_buf ? 64 : kKilledCount, 1.0f);
    float *buf = device_buf ? device_buf : host.data();
    RANK_CHECK_OK(ctx, ibex_allreduce(buf, buf, 64, IBEX_F32, IBEX_SUM, comm, nullptr));
    warmed_up->fetch_add(1);
    if (ctx.rank == victim && !victim_joins) die_when_all_ready(ctx, warmed_up, 0);
    ibex_request_t *req = nullptr;
    const auto t0 = std::chrono::steady_clock::now();
    RANK_CHECK_OK(ctx, ibex_allreduce(buf, buf, kKilledCount, IBEX_F32, IBEX_SUM, comm, &req));
    if (ctx.rank == victim) die_when_all_ready(ctx, warmed_up, 2);
    const ibex_status_t st = ibex_wait(req);
    const long took = ms_since(t0);
    RANK_CHECK(ctx, st == IBEX_ERR_REMOTE || st == IBEX_ERR_TIMEOUT, "rank %d: allreduce returned %s (%s)", ctx.rank,
               ibex_strerror(st), ibex_last_error());
    ctx.say("rank %d: error after %ld ms: %s", ctx.rank, took, ibex_last_error());
    RANK_CHECK(ctx, took < kTimeoutMs / 2, "rank %d: error only after %ld ms", ctx.rank, took);
    // The communicator stays in its error state: later calls fail at once.
    ibex_status_t async = IBEX_OK;
    RANK_CHECK_OK(ctx, ibex_comm_get_async_error(comm, &async));
    RANK_CHECK(ctx, async != IBEX_OK, "no async error recorded");
    const auto t1 = std::chrono::steady_clock::now();
    RANK_CHECK(ctx, ibex_barrier(comm, nullptr) != IBEX_OK, "barrier on a failed communicator succeeded");
    RANK_CHECK(ctx, ms_since(t1) < 1000, "failed barrier took %ld ms", ms_since(t1));
    RANK_CHECK_OK(ctx, ibex_comm_abort(comm));
    return 0;
}

inline void check_killed(int n, int victim, const InitComm &init = {}) {
    run_with_victim(n, victim, [&](RankCtx &ctx, std::atomic<int> *warmed_up) {
        return killed_body(ctx, victim, warmed_up, init);
    });
}

} // namespace ibex::test
