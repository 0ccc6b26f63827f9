#include "congestion/dcqcn/notification_point.h"

namespace ibex::cc::dcqcn {

bool NotificationPoint::on_ce(uint64_t now) {
    ++marked_;
    if (sent_ && now - last_ < interval_ns_) return false;
    last_ = now;
    ++sent_;
    return true;
}

} // namespace ibex::cc::dcqcn
