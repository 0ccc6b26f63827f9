// ibex_topo's output on the fixtures, compared with tests/data/topology/golden/.
// IBEX_UPDATE_GOLDEN=1 rewrites the golden files from the current output instead.
#include "tests/runtime/topology/fixture.h"

#include <cstdio>
#include <fstream>
#include <sstream>
#include <sys/wait.h>

namespace ibex::test {
namespace {

struct ToolRun {
    int rc;
    std::string out;
};

std::string tool() {
    const char *dir = std::getenv("IBEX_BUILD_DIR");
    return dir ? std::string(dir) + "/tools/ibex_topo/ibex_topo" : std::string(IBEX_TOPO_TOOL);
}

// Runs in the fixture folder so that the source printed is the bare file name; the
// environment overrides are removed so the output is the policy's alone.
ToolRun run(const std::string &args, const std::string &env = "", bool merge_stderr = false) {
    std::string cmd = "cd '" + topo_data("") + "' && env -u IBEX_NIC -u IBEX_NUMA -u IBEX_TOPO_FILE -u IBEX_LOG_LEVEL " +
                      env + " '" + tool() + "' " + args + (merge_stderr ? " 2>&1" : " 2>/dev/null");
    ToolRun r{-1, {}};
    FILE *p = popen(cmd.c_str(), "r");
    if (!p) return r;
    char buf[4096];
    for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) r.out.append(buf, n);
    int status = pclose(p);
    r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return r;
}

std::string slurp(const std::string &path) {
    std::ifstream f(path);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

void expect_golden(const std::string &args, const std::string &golden) {
    ToolRun r = run(args);
    ASSERT_EQ(r.rc, 0) << "ibex_topo " << args;
    std::string path = topo_data("golden/" + golden);
    if (std::getenv("IBEX_UPDATE_GOLDEN")) {
        std::ofstream(path) << r.out;
        return;
    }
    std::string want = slurp(path);
    ASSERT_FALSE(want.empty()) << "missing golden file " << path;
    EXPECT_EQ(r.out, want) << "ibex_topo " << args << " differs from " << path
                           << " (IBEX_UPDATE_GOLDEN=1 rewrites it after review)";
}

TEST(IbexTopoGolden, DgxLike) { expect_golden("--topo dgx_like.xml", "dgx_like.txt"); }
TEST(IbexTopoGolden, DgxLikeJson) { expect_golden("--topo dgx_like.xml --json", "dgx_like.json"); }
TEST(IbexTopoGolden, SingleNic) { expect_golden("--topo single_nic.xml", "single_nic.txt"); }
TEST(IbexTopoGolden, NumaUnknown) { expect_golden("--topo numa_unknown.xml", "numa_unknown.txt"); }
TEST(IbexTopoGolden, ThisMachine) { expect_golden("--topo this_machine.xml", "this_machine.txt"); }
TEST(IbexTopoGolden, ThisMachineJson) { expect_golden("--topo this_machine.xml --json", "this_machine.json"); }
TEST(IbexTopoGolden, DgxLikeFourRanks) { expect_golden("--topo dgx_like.xml --ranks 4", "dgx_like_ranks4.txt"); }

TEST(IbexTopo, JsonParses) {
    if (std::system("python3 -c pass >/dev/null 2>&1") != 0) GTEST_SKIP() << "python3 not available";
    for (const char *f : {"dgx_like.xml", "single_nic.xml", "numa_unknown.xml", "this_machine.xml"}) {
        ToolRun r = run(std::string("--topo ") + f + " --json | python3 -m json.tool >/dev/null && echo ok");
        EXPECT_EQ(r.out, "ok\n") << f;
    }
}

TEST(IbexTopo, TopoFileFromEnvironment) {
    ToolRun a = run("", "IBEX_TOPO_FILE=single_nic.xml");
    ToolRun b = run("--topo single_nic.xml");
    EXPECT_EQ(a.rc, 0);
    EXPECT_EQ(a.out, b.out);
}

TEST(IbexTopo, EnvOverridesShowInTheBinding) {
    ToolRun r = run("--topo dgx_like.xml --ranks 2", "IBEX_NIC=mlx5_3 IBEX_NUMA=0");
    ASSERT_EQ(r.rc, 0);
    EXPECT_NE(r.out.find("NIC3  mlx5_3  enp198s0np0  SYS   0     7              0-7,16-23       IBEX_NIC IBEX_NUMA"),
              std::string::npos)
        << r.out;
}

TEST(IbexTopo, Help) {
    ToolRun r = run("-h");
    EXPECT_EQ(r.rc, 0);
    EXPECT_NE(r.out.find("usage: ibex_topo"), std::string::npos);
    EXPECT_NE(r.out.find("IBEX_NIC"), std::string::npos);
}

TEST(IbexTopo, MissingFileFails) {
    ToolRun r = run("--topo no_such.xml", "", true);
    EXPECT_EQ(r.rc, 1);
    EXPECT_NE(r.out.find("no_such.xml cannot be read: No such file or directory"), std::string::npos) << r.out;
}

TEST(IbexTopo, MalformedFileFails) {
    ToolRun r = run("--topo malformed.xml", "", true);
    EXPECT_EQ(r.rc, 1);
    EXPECT_NE(r.out.find("malformed.xml is not a valid hwloc XML topology"), std::string::npos) << r.out;
}

TEST(IbexTopo, BadFlags) {
    EXPECT_EQ(run("--ranks 0").rc, 2);
    EXPECT_EQ(run("--bogus").rc, 2);
    EXPECT_EQ(run("extra").rc, 2);
}

TEST(IbexTopo, BadNicOverrideFails) {
    ToolRun r = run("--topo dgx_like.xml", "IBEX_NIC=mlx5_9", true);
    EXPECT_EQ(r.rc, 1);
    EXPECT_NE(r.out.find("\"mlx5_9\" is not a NIC of this host"), std::string::npos) << r.out;
}

} // namespace
} // namespace ibex::test
