// DCQCN for one RC QP behind the CongestionControl interface: the QP is the reaction
// point of what it sends and the notification point of what it receives.
#pragma once

#include "congestion/cc.h"
#include "congestion/dcqcn/notification_point.h"
#include "congestion/dcqcn/reaction_point.h"

namespace ibex::cc::dcqcn {

class Dcqcn final : public CongestionControl {
public:
    explicit Dcqcn(const Params &p) : rp_(p), np_(p.cnp_interval_ns) {}
    Actions update(uint64_t now_ns, const Event &ev) override;
    const ReactionPoint &rp() const { return rp_; }
    const NotificationPoint &np() const { return np_; }

private:
    ReactionPoint rp_;
    NotificationPoint np_;
};

} // namespace ibex::cc::dcqcn
