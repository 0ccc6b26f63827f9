// Test fixture: a communicator of one rank on udp:lo, in the test's own process, for what
// needs no peer (argument checks, a rank's copy to itself).
#pragma once

#include <gtest/gtest.h>

#include <ibex/coll.h>

#include "runtime/bootstrap/unique_id.h"

namespace ibex::test {

class OneRankComm : public ::testing::Test {
protected:
    void SetUp() override {
        ASSERT_EQ(ibex_get_unique_id(&id_), IBEX_OK) << ibex_last_error();
        ibex_comm_config_t cfg = IBEX_COMM_CONFIG_INIT;
        cfg.device = "udp:lo";
        ASSERT_EQ(ibex_comm_init_rank(&comm, 1, &id_, 0, &cfg), IBEX_OK) << ibex_last_error();
    }
    void TearDown() override {
        if (comm) {
            EXPECT_EQ(ibex_comm_destroy(comm), IBEX_OK);
        }
        ibex::bootstrap::release_unique_id(&id_);
    }
    ibex_comm_t *comm = nullptr;

private:
    ibex_unique_id_t id_{};
};

} // namespace ibex::test
