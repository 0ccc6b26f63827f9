// Builds a simulator over a named topology for the tests, failing the test on a bad one.
#pragma once

#include <memory>

#include <gtest/gtest.h>

#include "congestion/sim/simulator.h"

namespace ibex::sim::test {

inline std::unique_ptr<Simulator> make_sim(const Topology &t, const SimConfig &cfg) {
    Routing r;
    EXPECT_EQ(r.build(t), IBEX_OK) << ibex_last_error();
    return std::make_unique<Simulator>(r, cfg);
}

// Nanoseconds to serialise `bytes` at `gbps`.
inline double ser_ns(double bytes, double gbps) { return bytes * 8 / gbps; }

} // namespace ibex::sim::test
