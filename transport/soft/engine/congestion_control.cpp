#include "transport/soft/engine/congestion_control.h"

#include <algorithm>
#include <cstring>
#include <mutex>

#include "congestion/dcqcn/dcqcn.h"
#include "congestion/window/send_window.h"
#include "runtime/base/config.h"
#include "runtime/base/status.h"
#include "transport/soft/engine/context.h"

namespace ibex::soft {

Controller make_send_window(uint32_t max_inflight, uint32_t max_inflight_context) {
    cc::window::Params p;
    p.max_packets = max_inflight;
    p.shared_packets = max_inflight_context;
    return Controller(std::make_unique<cc::window::SendWindow>(p));
}

QpRate::QpRate(const RateControlConfig &c) : controller(std::make_unique<cc::dcqcn::Dcqcn>(c.params)) {
    pacer.set_rate(c.params.line_rate_mbps);
    pacer.set_burst(c.burst_ns);
}

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
        // The counters are DCQCN's: a QP whose context runs no DCQCN reports it disabled.
        const QpRate *r = qp->rate.get();
        if (const auto *d = r ? dynamic_cast<const cc::dcqcn::Dcqcn *>(r->controller.control.get()) : nullptr) {
            const auto &rp = d->rp();
            s.enabled = 1;
            s.rate_mbps = rp.rate_mbps();
            s.target_rate_mbps = rp.target_mbps();
            s.alpha = rp.alpha();
            s.rp_cnp_handled = rp.cnps_handled();
            s.np_cnp_sent = d->np().cnps_sent();
            s.np_ecn_marked_roce_packets = d->np().marked();
            s.rate_timer_stage = rp.timer_stage();
            s.byte_counter_stage = rp.byte_stage();
        }
    }
    s.size = out->size;
    std::memcpy(out, &s, std::min<size_t>(out->size, sizeof s));
    return IBEX_OK;
}

} // namespace ibex::soft
