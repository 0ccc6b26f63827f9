// Test helper: runs a body in N forked ranks that share a unique id made by the parent
// (the child that becomes rank 0 inherits its listener). Each rank reports a line of text
// to the parent through its socketpair; a rank's body returns 0 for success. The parent
// reaps everything within a bound, so a hung rank fails the test instead of hanging it.
#pragma once

#include <gtest/gtest.h>
#include <ibex/coll.h>

#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "runtime/bootstrap/unique_id.h"
#include "tests/support/child_process.h"

namespace ibex::test {

struct RankCtx {
    int rank;
    int nranks;
    ibex_unique_id_t id;
    int fd; // to the parent
    // Appends a line to what the parent prints if the test fails.
    void say(const char *fmt, ...) const __attribute__((format(printf, 2, 3))) {
        char buf[512];
        va_list ap;
        va_start(ap, fmt);
        const int n = std::vsnprintf(buf, sizeof buf - 1, fmt, ap);
        va_end(ap);
        const size_t len = n < 0 ? 0 : std::min<size_t>(static_cast<size_t>(n), sizeof buf - 2);
        buf[len] = '\n';
        send_all(fd, buf, len + 1, 2000);
    }
};

struct RankOutcome {
    int code = -1;
    std::string text;
};

// Body: returns the rank's exit code (0 = pass).
inline std::vector<RankOutcome> run_ranks(int n, const std::function<int(RankCtx &)> &body, int max_seconds = 60) {
    ibex_unique_id_t id{};
    EXPECT_EQ(ibex_get_unique_id(&id), IBEX_OK) << ibex_last_error();
    std::vector<std::unique_ptr<ChildProcess>> kids;
    for (int r = 0; r < n; ++r) {
        auto k = std::make_unique<ChildProcess>();
        const bool ok = k->start(
            [&, r](int fd) {
                RankCtx ctx{r, n, id, fd};
                return body(ctx);
            },
            static_cast<unsigned>(max_seconds));
        EXPECT_TRUE(ok);
        kids.push_back(std::move(k));
    }
    bootstrap::release_unique_id(&id);
    std::vector<RankOutcome> out(static_cast<size_t>(n));
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(max_seconds + 5);
    for (int r = 0; r < n; ++r) {
        // Collect the text first (a child blocks if its socket fills), then the exit code.
        char buf[4096];
        for (;;) {
            if (!io_wait(kids[r]->fd(), POLLIN, end)) break;
            const ssize_t got = ::recv(kids[r]->fd(), buf, sizeof buf, MSG_DONTWAIT);
            if (got < 0 && (errno == EAGAIN || errno == EINTR)) continue;
            if (got <= 0) break;
            out[r].text.append(buf, static_cast<size_t>(got));
        }
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now());
        out[r].code = kids[r]->wait_exit(static_cast<int>(std::max<int64_t>(left.count(), 1)));
    }
    return out;
}

// Fails the test unless every rank exited 0, with what each said; echo: print that always
// (for figures worth seeing in the log).
inline void expect_all_passed(const std::vector<RankOutcome> &out, bool echo = false) {
    if (echo)
        for (const RankOutcome &o : out) std::printf("%s", o.text.c_str());
    for (size_t r = 0; r < out.size(); ++r)
        EXPECT_EQ(out[r].code, 0) << "rank " << r << ": " << ChildProcess::describe(out[r].code) << "\n" << out[r].text;
}

} // namespace ibex::test

// In a rank body: report and return a failure code when a call fails.
#define RANK_CHECK_OK(ctx, expr)                                                                          \
    do {                                                                                                  \
        const ibex_status_t _st = (expr);                                                                 \
        if (_st != IBEX_OK) {                                                                             \
            (ctx).say("rank %d: %s failed: %s: %s", (ctx).rank, #expr, ibex_strerror(_st), ibex_last_error()); \
            return 10;                                                                                    \
        }                                                                                                 \
    } while (0)

#define RANK_CHECK(ctx, cond, ...)                                                                        \
    do {                                                                                                  \
        if (!(cond)) {                                                                                    \
            (ctx).say(__VA_ARGS__);                                                                       \
            return 11;                                                                                    \
        }                                                                                                 \
    } while (0)

namespace ibex::test {

inline long ms_since(std::chrono::steady_clock::time_point t) {
    return static_cast<long>(
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t).count());
}

// On udp:lo, whose ranks of this host reach each other over shm (fast boxes, direct path).
inline ibex_status_t init_host_comm(RankCtx &ctx, ibex_comm_t **comm, int timeout_ms = 20000) {
    ibex_comm_config_t cfg = IBEX_COMM_CONFIG_INIT;
    cfg.device = "udp:lo";
    cfg.timeout_ms = timeout_ms;
    return ibex_comm_init_rank(comm, ctx.nranks, &ctx.id, ctx.rank, &cfg);
}

inline ibex_status_t init_comm(RankCtx &ctx, ibex_comm_t **comm, int timeout_ms) {
    ibex_comm_config_t cfg = IBEX_COMM_CONFIG_INIT;
    cfg.timeout_ms = timeout_ms;
    return ibex_comm_init_rank(comm, ctx.nranks, &ctx.id, ctx.rank, &cfg);
}

// Rank 1 reduces short_count floats where the others reduce count: every rank must get an
// error within 10 s (well inside the 20 s timeout), then abort cleanly.
inline int mismatched_count_body(RankCtx &ctx, size_t count, size_t short_count) {
    ibex_comm_t *comm = nullptr;
    RANK_CHECK_OK(ctx, init_comm(ctx, &comm, 20000));
    std::vector<float> x(count, 1.0f);
    const auto t0 = std::chrono::steady_clock::now();
    const ibex_status_t st =
        ibex_allreduce(x.data(), x.data(), ctx.rank == 1 ? short_count : count, IBEX_F32, IBEX_SUM, comm, nullptr);
    RANK_CHECK(ctx, st != IBEX_OK, "mismatched allreduce succeeded");
    ctx.say("rank %d: %s after %ld ms: %s", ctx.rank, ibex_strerror(st), ms_since(t0), ibex_last_error());
    RANK_CHECK(ctx, ms_since(t0) < 10000, "error only after %ld ms", ms_since(t0));
    RANK_CHECK_OK(ctx, ibex_comm_abort(comm));
    return 0;
}

// Every rank passed, and at least one named the mismatch.
inline void expect_mismatch_named(const std::vector<RankOutcome> &out) {
    bool named = false;
    for (const RankOutcome &o : out)
        named = named || o.text.find("different collectives, counts or types") != std::string::npos;
    expect_all_passed(out, true);
    EXPECT_TRUE(named) << "no rank explained the mismatch";
}

} // namespace ibex::test
