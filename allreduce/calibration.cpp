#include "allreduce/calibration.h"

#include <utility>
#include <vector>

#include "allreduce/comm.h"
#include "allreduce/stream_driver.h"
#include "runtime/base/log.h"
#include "runtime/base/status.h"

namespace ibex::coll {
namespace {

constexpr int kProbePings = 8;
constexpr size_t kProbeBulk = 1 << 20;
constexpr size_t kGammaBytes = 256 << 10;

} // namespace

ibex_status_t calibrate(ibex_comm *c) {
    CostModel model;
    if (c->opt.probe && c->nranks > 1) {
        std::vector<uint64_t> times;
        Op op;
        op.kind = OpKind::probe;
        op.args.count = 1;
        op.pings = kProbePings;
        op.bulk = kProbeBulk;
        op.times = &times;
        ibex_request *req = nullptr;
        IBEX_TRY(comm_submit(c, std::move(op), &req));
        IBEX_TRY(request_wait(req));
        double mine[3] = {0, 0, 0};
        probe_result(c->rank, c->nranks, kProbePings, kProbeBulk, times, &mine[0], &mine[1]);
        IBEX_TRY(comm_ensure_scratch(c, 3 * kGammaBytes));
        mine[2] = measure_gamma(c->scratch, kGammaBytes);
        std::vector<double> all(3 * static_cast<size_t>(c->nranks));
        IBEX_TRY(c->boot->allgather(mine, sizeof mine, all.data(), c->opt.timeout_ms));
        model = combine(all);
    }
    c->selector.configure(c->nranks, c->opt.exec.slice_bytes, model);
    IBEX_LOG(info, "communicator rank %d/%d: alpha %.2f us, beta %.3f ns/B, gamma %.3f ns/B (%s)", c->rank,
             c->nranks, model.alpha * 1e6, model.beta * 1e9, model.gamma * 1e9,
             model.measured ? "measured" : "defaults");
    return IBEX_OK;
}

} // namespace ibex::coll
