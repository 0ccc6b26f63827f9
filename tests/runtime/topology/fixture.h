// Shared helpers of the topology tests: fixture paths, RAII topology and environment.
#pragma once

#include <ibex/topology.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <optional>
#include <string>

#include "tests/support/scoped_env.h"

namespace ibex::test {

inline std::string topo_data(const std::string &name) {
    const char *dir = std::getenv("IBEX_TEST_DATA");
    return std::string(dir ? dir : IBEX_TOPO_TEST_DATA) + "/topology/" + name;
}

struct TopoDeleter {
    void operator()(ibex_topology_t *t) const { ibex_topo_free(t); }
};
using Topo = std::unique_ptr<ibex_topology_t, TopoDeleter>;

inline Topo load_fixture(const std::string &name) {
    ibex_topology_t *t = nullptr;
    ibex_status_t st = ibex_topo_load(topo_data(name).c_str(), &t);
    EXPECT_EQ(st, IBEX_OK) << ibex_last_error();
    return Topo(t);
}

} // namespace ibex::test
