// Rank, size and rendezvous from each launcher's environment, which one wins when several
// are present, and errors that name the variables.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "runtime/bootstrap/launcher_env.h"
#include "runtime/bootstrap/unique_id.h"

namespace ibex::bootstrap {
namespace {

const char *const kVars[] = {"IBEX_RANK",    "IBEX_NRANKS",  "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                             "SLURM_PROCID", "SLURM_NTASKS", "RANK",                 "WORLD_SIZE",
                             "MASTER_ADDR",  "MASTER_PORT",  "IBEX_ROOT_ADDR"};

class LauncherEnv : public ::testing::Test {
protected:
    void SetUp() override {
        for (const char *v : kVars) {
            if (const char *old = std::getenv(v)) saved_.emplace_back(v, old);
            unsetenv(v);
        }
    }
    void TearDown() override {
        for (const char *v : kVars) unsetenv(v);
        for (auto &[k, v] : saved_) setenv(k.c_str(), v.c_str(), 1);
    }
    std::vector<std::pair<std::string, std::string>> saved_;
};

TEST_F(LauncherEnv, OpenMpi) {
    setenv("OMPI_COMM_WORLD_RANK", "2", 1);
    setenv("OMPI_COMM_WORLD_SIZE", "4", 1);
    setenv("IBEX_ROOT_ADDR", "10.0.0.1:29500", 1);
    LaunchInfo li;
    ASSERT_EQ(launch_info_from_env(&li), IBEX_OK) << ibex_last_error();
    EXPECT_EQ(li.rank, 2);
    EXPECT_EQ(li.nranks, 4);
    EXPECT_EQ(li.root_addr, "10.0.0.1:29500");
    EXPECT_STREQ(li.launcher, "mpirun");
}

TEST_F(LauncherEnv, Slurm) {
    setenv("SLURM_PROCID", "0", 1);
    setenv("SLURM_NTASKS", "8", 1);
    setenv("IBEX_ROOT_ADDR", "node1:4000", 1);
    LaunchInfo li;
    ASSERT_EQ(launch_info_from_env(&li), IBEX_OK) << ibex_last_error();
    EXPECT_EQ(li.rank, 0);
    EXPECT_EQ(li.nranks, 8);
    EXPECT_STREQ(li.launcher, "srun");
}

TEST_F(LauncherEnv, TorchrunUsesMasterAddr) {
    setenv("RANK", "1", 1);
    setenv("WORLD_SIZE", "2", 1);
    setenv("MASTER_ADDR", "127.0.0.1", 1);
    setenv("MASTER_PORT", "29501", 1);
    LaunchInfo li;
    ASSERT_EQ(launch_info_from_env(&li), IBEX_OK) << ibex_last_error();
    EXPECT_EQ(li.rank, 1);
    EXPECT_EQ(li.root_addr, "127.0.0.1:29501");
    EXPECT_STREQ(li.launcher, "torchrun");
    // IBEX_ROOT_ADDR wins over MASTER_*.
    setenv("IBEX_ROOT_ADDR", "127.0.0.2:7", 1);
    ASSERT_EQ(launch_info_from_env(&li), IBEX_OK);
    EXPECT_EQ(li.root_addr, "127.0.0.2:7");
}

TEST_F(LauncherEnv, IbexVariablesWinOverLaunchers) {
    setenv("IBEX_RANK", "3", 1);
    setenv("IBEX_NRANKS", "5", 1);
    setenv("OMPI_COMM_WORLD_RANK", "0", 1);
    setenv("OMPI_COMM_WORLD_SIZE", "2", 1);
    setenv("IBEX_ROOT_ADDR", "127.0.0.1:5000", 1);
    LaunchInfo li;
    ASSERT_EQ(launch_info_from_env(&li), IBEX_OK);
    EXPECT_EQ(li.rank, 3);
    EXPECT_EQ(li.nranks, 5);
    EXPECT_STREQ(li.launcher, "ibex");
}

TEST_F(LauncherEnv, ErrorsNameTheVariables) {
    LaunchInfo li;
    EXPECT_EQ(launch_info_from_env(&li), IBEX_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(ibex_last_error()).find("IBEX_RANK"), std::string::npos) << ibex_last_error();
    setenv("SLURM_PROCID", "1", 1);
    setenv("SLURM_NTASKS", "2", 1);
    EXPECT_EQ(launch_info_from_env(&li), IBEX_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(ibex_last_error()).find("IBEX_ROOT_ADDR"), std::string::npos) << ibex_last_error();
    setenv("IBEX_ROOT_ADDR", "127.0.0.1:1", 1);
    setenv("SLURM_PROCID", "2", 1);
    EXPECT_EQ(launch_info_from_env(&li), IBEX_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(ibex_last_error()).find("SLURM_PROCID"), std::string::npos) << ibex_last_error();
    setenv("SLURM_PROCID", "x", 1);
    EXPECT_EQ(launch_info_from_env(&li), IBEX_ERR_INVALID_ARGUMENT);
    setenv("SLURM_PROCID", "1", 1);
    ASSERT_EQ(launch_info_from_env(&li), IBEX_OK);
    ibex_unique_id_t id{};
    ASSERT_EQ(id_from_root_addr(li.root_addr.c_str(), &id), IBEX_OK);
    EXPECT_STREQ(id.text, "127.0.0.1:1/launcher");
    EXPECT_EQ(id_from_root_addr("127.0.0.1", &id), IBEX_ERR_INVALID_ARGUMENT);
}

} // namespace
} // namespace ibex::bootstrap
