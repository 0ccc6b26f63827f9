// The QP attributes NCCL's own IB transport takes from its environment, read the same
// way here so that a job's settings reach the QPs ibex brings up for it.
#include <cerrno>
#include <cstdlib>

#include "plugins/nccl-net/state.h"

namespace ibex_nccl {
namespace {

// The integer `name` holds, if it is one within [lo, hi]; a value that is not is warned
// about once and left out, as NCCL leaves out a parameter it cannot parse.
bool read_knob(const char *name, long lo, long hi, long *out) {
    const char *text = std::getenv(name);
    if (text == nullptr || *text == '\0')
        return false;
    char *end = nullptr;
    errno = 0;
    const long v = std::strtol(text, &end, 0);
    if (errno != 0 || *end != '\0' || v < lo || v > hi) {
        IBEX_NCCL_WARN("NET/IBEX : %s=%s ignored: not an integer in %ld..%ld", name, text, lo, hi);
        return false;
    }
    *out = v;
    return true;
}

QpKnobs read_env() {
    QpKnobs k;
    struct Knob {
        const char *name;
        long lo, hi;
        uint8_t *field;
        unsigned bit;
    };
    // NCCL_IB_TIMEOUT from 1: 0 is "no timeout", and a dead peer must surface as an error.
    const Knob knobs[] = {{"NCCL_IB_TIMEOUT", 1, 31, &k.attr.timeout, IBEX_QP_TIMEOUT},
                          {"NCCL_IB_RETRY_CNT", 0, 7, &k.attr.retry_cnt, IBEX_QP_RETRY_CNT},
                          {"NCCL_IB_SL", 0, 7, &k.attr.sl, IBEX_QP_SL},
                          {"NCCL_IB_TC", 0, 255, &k.attr.traffic_class, IBEX_QP_TRAFFIC_CLASS}};
    for (const Knob &knob : knobs) {
        long v = 0;
        if (read_knob(knob.name, knob.lo, knob.hi, &v)) {
            *knob.field = static_cast<uint8_t>(v);
            k.mask |= knob.bit;
        }
    }
    return k;
}

} // namespace

QpKnobs qp_knobs(int traffic_class) {
    static const QpKnobs from_env = read_env();
    QpKnobs k = from_env;
    if (traffic_class >= 0 && traffic_class <= 255) {
        k.attr.traffic_class = static_cast<uint8_t>(traffic_class);
        k.mask |= IBEX_QP_TRAFFIC_CLASS;
    }
    return k;
}

} // namespace ibex_nccl
