#include "tools/ibex_allreduce_perf/bench.h"

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <unistd.h>
#include <vector>

#include "allreduce/cpu/reduce.h"
#include "tools/ibex_allreduce_perf/check.h"
#include "tools/ibex_allreduce_perf/memory.h"
#include "tools/ibex_allreduce_perf/report.h"

namespace ibex::collperf {
namespace {

using Clock = std::chrono::steady_clock;

// An ibex call that failed: what, status, detail (thrown inside this file only).
struct CallFailed {
    std::string what;
    ibex_status_t status;
    std::string detail;
};

void check_call(ibex_status_t st, const char *what) {
    if (st != IBEX_OK) throw CallFailed{what, st, ibex_last_error()};
}

// Sizes as nccl-tests steps them: multiply by -f, else add -i. Bounded.
std::vector<size_t> sizes(const Options &o) {
    std::vector<size_t> v;
    for (size_t s = o.min_bytes; s <= o.max_bytes && v.size() < 10000;) {
        v.push_back(s);
        const size_t next = o.step_factor > 1 ? (s ? s * o.step_factor : 1) : s + o.step_bytes;
        if (next <= s) break;
        s = next;
    }
    return v;
}

class Runner {
public:
    Runner(ibex_comm_t *comm, const Options &o) : comm_(comm), o_(o) {
        check_call(ibex_comm_rank(comm, &rank_), "ibex_comm_rank");
        check_call(ibex_comm_size(comm, &n_), "ibex_comm_size");
        // Send and receive buffers for the largest size (allgather's send and
        // reduce_scatter's receive are a rank's share of it).
        bytes_ = o.max_bytes + 64;
        ibex_comm_t *shared = o.shared ? comm : nullptr;
        check_call(send_.allocate(bytes_, o.gpu, rank_, shared), o.gpu ? "GPU send buffer" : "send buffer");
        check_call(recv_.allocate(bytes_, o.gpu, rank_, shared), o.gpu ? "GPU receive buffer" : "receive buffer");
        if (o.gpu) host_.resize(bytes_); // inputs are built and results checked here
        check_call(ibex_comm_register(comm, send_.data(), bytes_), "ibex_comm_register");
        check_call(ibex_comm_register(comm, recv_.data(), bytes_), "ibex_comm_register");
    }
    ~Runner() {
        // Best effort: the communicator may already be in its error state.
        ibex_comm_deregister(comm_, send_.data());
        ibex_comm_deregister(comm_, recv_.data());
    }

    int rank() const { return rank_; }
    int nranks() const { return n_; }

    // One line of the table (nothing when the size holds no element per rank).
    bool measure(size_t bytes, ibex_datatype_t type, ibex_redop_t op, Row *row) {
        const size_t tsize = ibex_datatype_size(type);
        const bool split = coll_split(o_.coll);
        const size_t per = bytes / (tsize * (split ? static_cast<size_t>(n_) : 1u)); // elements per op argument
        if (per == 0) return false;
        row->type = type;
        row->op = op;
        row->has_op = coll_reduces(o_.coll);
        row->root = coll_rooted(o_.coll) ? o_.root : -1;
        row->count = split ? per * static_cast<size_t>(n_) : per;
        row->bytes = row->count * tsize;
        if (o_.coll == Coll::allreduce) row->algo = ibex_comm_allreduce_algo(comm_, row->bytes);
        row->oop = run_one(type, op, per, false, row->bytes);
        if (coll_in_place(o_.coll))
            row->ip = run_one(type, op, per, true, row->bytes);
        else
            row->ip.ran = false;
        return true;
    }

    // Sum of a count over ranks (for the #wrong total).
    long long sum_over_ranks(long long v) {
        int64_t x = v, out = 0;
        check_call(ibex_allreduce(&x, &out, 1, IBEX_I64, IBEX_SUM, comm_, nullptr), "ibex_allreduce (result count)");
        return out;
    }

    void barrier() { check_call(ibex_barrier(comm_, nullptr), "ibex_barrier"); }

    // Gathers "pid host" of every rank (for the "Using devices" lines).
    std::vector<std::string> who() {
        struct Id {
            int32_t pid;
            char host[60];
        } mine{};
        mine.pid = static_cast<int32_t>(getpid());
        gethostname(mine.host, sizeof mine.host - 1);
        std::vector<Id> v(static_cast<size_t>(n_));
        check_call(ibex_allgather(&mine, v.data(), sizeof mine, IBEX_U8, comm_, nullptr), "ibex_allgather (rank list)");
        std::vector<std::string> out;
        for (const Id &id : v) out.push_back(std::to_string(id.pid) + " on " + std::string(id.host, strnlen(id.host, sizeof id.host)));
        return out;
    }

private:
    struct Args {
        const void *send;
        void *recv;
    };

    // Where the operation reads and writes; in place as NCCL defines it.
    Args args(size_t per, size_t tsize, bool in_place) const {
        uint8_t *r = recv_.data();
        if (!in_place) return {send_.data(), r};
        switch (o_.coll) {
        case Coll::allgather: return {r + static_cast<size_t>(rank_) * per * tsize, r};
        case Coll::reduce_scatter: return {r, r + static_cast<size_t>(rank_) * per * tsize};
        default: return {r, r};
        }
    }

    // This rank's input, written where the operation reads it (built on the host and
    // copied over for GPU buffers).
    void fill(const Args &a, ibex_datatype_t type, ibex_redop_t op, size_t per) {
        void *dst = const_cast<void *>(a.send);
        const size_t count =
            o_.coll == Coll::reduce_scatter || o_.coll == Coll::alltoall ? per * static_cast<size_t>(n_) : per;
        if (!o_.gpu) {
            fill_input(dst, count, type, op, rank_);
            return;
        }
        fill_input(host_.data(), count, type, op, rank_);
        check_call(send_.write(dst, host_.data(), count * ibex_datatype_size(type)), "input upload");
    }

    // Wrong elements of this rank's result (copied back first from GPU buffers).
    long long wrong_in(const void *out, const CheckSpec &spec) {
        if (!o_.gpu) return count_wrong(out, spec);
        check_call(recv_.read(host_.data(), out, spec.count * ibex_datatype_size(spec.type)), "result download");
        return count_wrong(host_.data(), spec);
    }

    void issue(const Args &a, ibex_datatype_t type, ibex_redop_t op, size_t per, ibex_request_t **req) {
        switch (o_.coll) {
        case Coll::allreduce: check_call(ibex_allreduce(a.send, a.recv, per, type, op, comm_, req), "ibex_allreduce"); break;
        case Coll::reduce_scatter:
            check_call(ibex_reduce_scatter(a.send, a.recv, per, type, op, comm_, req), "ibex_reduce_scatter");
            break;
        case Coll::allgather: check_call(ibex_allgather(a.send, a.recv, per, type, comm_, req), "ibex_allgather"); break;
        case Coll::broadcast:
            check_call(ibex_broadcast(a.send, a.recv, per, type, o_.root, comm_, req), "ibex_broadcast");
            break;
        case Coll::reduce: check_call(ibex_reduce(a.send, a.recv, per, type, op, o_.root, comm_, req), "ibex_reduce"); break;
        case Coll::alltoall: check_call(ibex_alltoall(a.send, a.recv, per, type, comm_, req), "ibex_alltoall"); break;
        case Coll::sendrecv: {
            // nccl-tests' sendrecv_perf: to the next rank, from the one before, together.
            const ibex_p2p_op_t ops[] = {
                {IBEX_P2P_SEND, (rank_ + 1) % n_, const_cast<void *>(a.send), per, type},
                {IBEX_P2P_RECV, (rank_ + n_ - 1) % n_, a.recv, per, type}};
            check_call(ibex_p2p_batch(ops, 2, comm_, req), "ibex_p2p_batch");
            break;
        }
        }
    }

    Result run_one(ibex_datatype_t type, ibex_redop_t op, size_t per, bool in_place, size_t table_bytes) {
        const size_t tsize = ibex_datatype_size(type);
        const Args a = args(per, tsize, in_place);
        fill(a, type, op, per);
        // Warm-up the way the timed loop issues (as nccl-tests does), so that it also warms
        // what issuing without waiting uses: requests, the stream's queue.
        std::vector<ibex_request_t *> reqs(static_cast<size_t>(o_.blocking ? 0 : std::max(o_.iters, o_.warmup)));
        const auto issue_all = [&](int count) {
            if (o_.blocking) {
                for (int i = 0; i < count; ++i) issue(a, type, op, per, nullptr);
                return;
            }
            for (int i = 0; i < count; ++i) issue(a, type, op, per, &reqs[static_cast<size_t>(i)]);
            for (int i = 0; i < count; ++i) check_call(ibex_wait(reqs[static_cast<size_t>(i)]), "ibex_wait");
        };
        issue_all(o_.warmup);
        barrier();
        const auto t0 = Clock::now();
        issue_all(o_.iters);
        double us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / o_.iters;
        // -a: rank 0's time, or the mean/min/max over ranks.
        if (n_ > 1) {
            static const ibex_redop_t how[] = {IBEX_SUM, IBEX_AVG, IBEX_MIN, IBEX_MAX};
            double t = us;
            if (o_.average == 0) check_call(ibex_broadcast(&us, &t, 1, IBEX_F64, 0, comm_, nullptr), "ibex_broadcast (time)");
            else check_call(ibex_allreduce(&us, &t, 1, IBEX_F64, how[o_.average], comm_, nullptr), "ibex_allreduce (time)");
            us = t;
        }
        long long wrong = -1;
        if (o_.check) {
            // Fresh input, poisoned output, one operation, compare.
            check_call(recv_.fill(0xff), "poisoning the output");
            fill(a, type, op, per);
            issue(a, type, op, per, nullptr);
            const bool whole = o_.coll == Coll::allgather || o_.coll == Coll::alltoall;
            CheckSpec spec{o_.coll, type, op, rank_, n_, o_.root, whole ? per * static_cast<size_t>(n_) : per};
            wrong = sum_over_ranks(wrong_in(a.recv, spec));
        }
        return make_result(o_.coll, n_, table_bytes, us, wrong);
    }

    ibex_comm_t *comm_;
    const Options &o_;
    int rank_ = 0, n_ = 1;
    size_t bytes_ = 0;
    PerfBuffer send_, recv_;
    std::vector<uint8_t> host_; // GPU buffers: host side of inputs and results
};

// What the communicator learnt: hosts, links and their constants, and which allreduce
// algorithm the cost model (or --algo) picks for each size of the run.
void print_topology(FILE *f, ibex_comm_t *comm, const Options &o) {
    ibex_comm_topology_t t{};
    t.size = sizeof t;
    if (ibex_comm_query_topology(comm, &t) != IBEX_OK) return;
    std::fprintf(f,
                 "# Topology: %d host%s, %s ranks per host; rank 0 reaches %d peer%s over shm, %d over the device\n"
                 "# Cost model: between hosts alpha %.2f us, beta %.4f ns/B; in a host alpha %.2f us, beta %.4f ns/B; "
                 "gamma %.4f ns/B\n",
                 t.hosts, t.hosts == 1 ? "" : "s", t.ranks_per_host ? std::to_string(t.ranks_per_host).c_str() : "uneven",
                 t.shm_peers, t.shm_peers == 1 ? "" : "s", t.net_peers, t.alpha_us, t.beta_ns_per_byte, t.local_alpha_us,
                 t.local_beta_ns_per_byte, t.gamma_ns_per_byte);
    std::fprintf(f, "# Slice: %llu B, %d staging slots per peer\n", static_cast<unsigned long long>(t.slice_bytes),
                 t.staging_slots);
    if (t.big_bytes > t.small_bytes)
        std::fprintf(f,
                     "# Cost model beyond the caches (those betas and gamma up to %llu B, these from %llu B): "
                     "between hosts beta %.4f ns/B; in a host beta %.4f ns/B; gamma %.4f ns/B\n",
                     static_cast<unsigned long long>(t.small_bytes), static_cast<unsigned long long>(t.big_bytes),
                     t.big_beta_ns_per_byte, t.big_local_beta_ns_per_byte, t.big_gamma_ns_per_byte);
    if (t.hier_join_us > 0 || t.hier_scale != 1 || t.rhd_join_us > 0 || t.rhd_scale != 1)
        std::fprintf(f,
                     "# Cost model timed at %llu and %llu B: hierarchical x%.2f + %.2f us per phase boundary; "
                     "rhd x%.2f + %.2f us per change of partner\n",
                     static_cast<unsigned long long>(t.small_bytes), static_cast<unsigned long long>(t.big_bytes),
                     t.hier_scale, t.hier_join_us, t.rhd_scale, t.rhd_join_us);
    if (o.coll != Coll::allreduce) return;
    std::string line;
    const std::vector<size_t> all = sizes(o);
    for (size_t i = 0; i < all.size();) {
        const std::string algo = ibex_comm_allreduce_algo(comm, all[i]);
        size_t j = i;
        while (j + 1 < all.size() && algo == ibex_comm_allreduce_algo(comm, all[j + 1])) ++j;
        line += (line.empty() ? "" : ", ") + std::to_string(all[i]) + (j > i ? "-" + std::to_string(all[j]) : "") +
                " B " + algo;
        i = j + 1;
    }
    std::fprintf(f, "# Algorithm: %s\n# Predicted time (cost model, us):", line.c_str());
    for (size_t b : all) std::fprintf(f, " %zu:%.1f", b, ibex_comm_allreduce_predict_us(comm, b));
    std::fprintf(f, "\n");
}

std::string device_label(const Options &o) {
    if (!o.device.empty()) return o.device;
    const char *env = std::getenv("IBEX_DEVICE");
    return env && *env ? env : "(first listed)";
}

} // namespace

int run_benchmark(ibex_comm_t *comm, const Options &o, const std::string &launcher) {
    // With --json alone the JSON owns stdout and the table moves to stderr.
    FILE *table = o.json && o.json_path.empty() ? stderr : stdout;
    int rank = -1;
    ibex_comm_rank(comm, &rank);
    if (std::string why; o.gpu && !gpu_usable(&why)) {
        if (rank == 0) std::fprintf(stderr, "ibex_allreduce_perf: -G 1 / --mem cuda: %s\n", why.c_str());
        return 2;
    }
    try {
        Runner run(comm, o);
        rank = run.rank();
        const int n = run.nranks();
        if (coll_rooted(o.coll) && o.root >= n) {
            if (rank == 0) std::fprintf(stderr, "ibex_allreduce_perf: -r %d is not a rank (%d ranks)\n", o.root, n);
            return 2;
        }
        const std::vector<std::string> ranks = run.who();
        if (rank == 0) {
            std::fprintf(table, "# ibex_allreduce_perf: %s, %d rank%s (%s), device %s, reduce kernels %s, buffers %s\n",
                         coll_name(o.coll), n, n == 1 ? "" : "s", launcher.c_str(), device_label(o).c_str(),
                         ibex::coll::reduce_isa(), o.gpu ? "GPU (rank % GPU count)" : o.shared ? "host, ibex_comm_mem_alloc" : "host");
            std::fprintf(table, "# minBytes %zu maxBytes %zu step: %zu(%s) warmup iters: %d iters: %d validation: %d blocking: %d\n",
                         o.min_bytes, o.max_bytes, o.step_factor > 1 ? o.step_factor : o.step_bytes,
                         o.step_factor > 1 ? "factor" : "bytes", o.warmup, o.iters, o.check ? 1 : 0, o.blocking);
            std::fprintf(table, "#\n# Using devices\n");
            for (int r = 0; r < n; ++r)
                std::fprintf(table, "#  Rank %2d Pid %s device %s\n", r, ranks[static_cast<size_t>(r)].c_str(),
                             device_for_rank(device_label(o), r).c_str());
            print_topology(table, comm, o);
            print_header(table);
        }
        std::vector<Row> rows;
        long long wrong = 0;
        for (ibex_datatype_t type : o.types) {
            for (ibex_redop_t op : o.ops) {
                for (size_t bytes : sizes(o)) {
                    Row row;
                    if (!run.measure(bytes, type, op, &row)) continue;
                    if (rank == 0) print_row(table, row);
                    wrong += (row.oop.wrong > 0 ? row.oop.wrong : 0) + (row.ip.wrong > 0 ? row.ip.wrong : 0);
                    rows.push_back(row);
                }
            }
        }
        if (rank == 0) {
            print_footer(table, rows, wrong, o.check != 0);
            if (o.json) {
                RunInfo info{o.coll, n, launcher, device_label(o), ibex::coll::reduce_isa(), &o};
                FILE *f = o.json_path.empty() ? stdout : std::fopen(o.json_path.c_str(), "w");
                if (!f) {
                    std::fprintf(stderr, "ibex_allreduce_perf: cannot write %s: %s\n", o.json_path.c_str(), std::strerror(errno));
                    return 2;
                }
                write_json(f, info, rows);
                if (f != stdout) std::fclose(f);
            }
        }
        return wrong ? 1 : 0;
    } catch (const CallFailed &e) {
        std::fprintf(stderr, "ibex_allreduce_perf: rank %d: %s failed: %s%s%s\n", rank, e.what.c_str(),
                     ibex_strerror(e.status), e.detail.empty() ? "" : ": ", e.detail.c_str());
        return 2;
    }
}

} // namespace ibex::collperf
