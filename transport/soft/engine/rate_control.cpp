#include "transport/soft/engine/rate_control.h"

#include <algorithm>
#include <cstring>
#include <mutex>

#include "runtime/base/config.h"
#include "runtime/base/status.h"
#include "transport/soft/engine/context.h"

namespace ibex::soft {

bool rate_control_config(const char *profile, uint32_t line_rate_mbps, RateControlConfig &out, ibex_status_t *st) {
    out = RateControlConfig{};
    const std::string name = profile ? profile : config::get_string("IBEX_DCQCN", "off");
    const double line = line_rate_mbps ? double(line_rate_mbps)
                                       : config::get_double("IBEX_DCQCN_LINE_RATE", 10000, 1, 800000);
    out.profile = name;
    out.burst_ns = uint64_t(config::get_int("IBEX_DCQCN_BURST_US", int64_t(out.burst_ns / 1000), 1, 1000000)) * 1000;
    if (name == "off" || name == "none" || name.empty()) return true;
    if (!cc::dcqcn::preset_params(name, line, out.params)) {
        *st = fail(IBEX_ERR_INVALID_ARGUMENT, "DCQCN profile \"%s\" unknown (off, paper, mlx5)", name.c_str());
        return false;
    }
    cc::dcqcn::KnobValues v{};
    for (const cc::dcqcn::KnobInfo &k : cc::dcqcn::knob_table()) {
        const std::string env = "IBEX_DCQCN_" + std::string(k.name);
        const int64_t x = config::get_int(env.c_str(), INT64_MIN, k.min, k.model_max);
        if (x != INT64_MIN) cc::dcqcn::at(v, k.knob) = x;
    }
    std::string err;
    if (!cc::dcqcn::params_from_knobs(v, out.params, err)) {
        *st = fail(IBEX_ERR_INVALID_ARGUMENT, "DCQCN: %s", err.c_str());
        return false;
    }
    out.enabled = true;
    return true;
}

ibex_status_t query_qp_cc(ibex_qp *q, ibex_qp_cc_t *out) {
    auto *qp = static_cast<SoftQp *>(q);
    ibex_qp_cc_t s{};
    {
        std::lock_guard l(qp->ctx->mutex());
        if (const QpRate *r = qp->rate.get()) {
            const auto &rp = r->dcqcn.rp();
            s.enabled = 1;
            s.rate_mbps = rp.rate_mbps();
            s.target_rate_mbps = rp.target_mbps();
            s.alpha = rp.alpha();
            s.rp_cnp_handled = rp.cnps_handled();
            s.np_cnp_sent = r->dcqcn.np().cnps_sent();
            s.np_ecn_marked_roce_packets = r->dcqcn.np().marked();
            s.rate_timer_stage = rp.timer_stage();
            s.byte_counter_stage = rp.byte_stage();
        }
    }
    s.size = out->size;
    std::memcpy(out, &s, std::min<size_t>(out->size, sizeof s));
    return IBEX_OK;
}

} // namespace ibex::soft
