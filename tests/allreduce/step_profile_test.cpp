// The per-step timing of multi-step ops (allreduce/step_profile.h): off unless its
// variable says 1, means per op over the steps named, one line per report.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "allreduce/step_profile.h"
#include "tests/support/scoped_env.h"

namespace {

using ibex::coll::StepProfile;

constexpr const char *kVar = "IBEX_TEST_STEP_PROFILE";

std::string report_of(StepProfile &p, const char *extra = "") {
    testing::internal::CaptureStderr();
    p.report("test", 3, extra);
    return testing::internal::GetCapturedStderr();
}

// The mean of step `name` in a report line, or -1 where it is missing.
double mean_of(const std::string &line, const std::string &name) {
    const auto at = line.find(" " + name + " ");
    if (at == std::string::npos) return -1;
    return std::stod(line.substr(at + name.size() + 2));
}

TEST(StepProfile, OffUnlessItsVariableSaysSo) {
    for (const char *value : {"", "0"}) {
        ibex::test::ScopedEnv env(kVar, std::string(value));
        StepProfile p;
        p.start(kVar, {"a", "b"});
        EXPECT_FALSE(p.on());
        p.lap(-1);
        p.lap(0);
        p.op_done();
        EXPECT_EQ(report_of(p), "");
    }
}

TEST(StepProfile, MeansPerOpInOneLine) {
    ibex::test::ScopedEnv env(kVar, std::string("1"));
    StepProfile p;
    p.start(kVar, {"wait", "work"});
    ASSERT_TRUE(p.on());
    for (int op = 0; op < 2; ++op) {
        p.lap(-1);
        std::this_thread::sleep_for(std::chrono::milliseconds(3));
        p.lap(0);
        p.lap(1);
        p.lap(5); // past the steps named: only moves the mark
        p.op_done();
    }
    const std::string line = report_of(p, " (extra words)");
    EXPECT_EQ(line.rfind("ibex test profile, rank 3: 2 ops (extra words), mean us:", 0), 0u) << line;
    EXPECT_EQ(line.back(), '\n');
    EXPECT_EQ(line.find('\n'), line.size() - 1) << "one line: " << line;
    // Each op slept 3 ms in "wait" (the mean per op is at least that), none in "work".
    EXPECT_GE(mean_of(line, "wait"), 3000.0) << line;
    EXPECT_GE(mean_of(line, "work"), 0.0) << line;
    // A report starts the counts again: nothing more to say.
    EXPECT_EQ(report_of(p), "");
}

} // namespace
