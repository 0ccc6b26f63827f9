// The per-thread error detail: a detail that wraps the one before it keeps both.
#include <gtest/gtest.h>

#include <cerrno>
#include <string>

#include "runtime/base/status.h"

namespace {

TEST(StatusDetail, AWrappedDetailKeepsTheOneItWraps) {
    ibex::fail(IBEX_ERR_INVALID_ARGUMENT, "sl %u: out of range", 9u);
    ibex::fail(IBEX_ERR_INVALID_ARGUMENT, "connecting to rank %d: %s", 1, ibex_last_error());
    EXPECT_STREQ(ibex_last_error(), "connecting to rank 1: sl 9: out of range");
    ibex::fail_errno(IBEX_ERR_SYSTEM, ENOENT, "opening %s", "x");
    ibex::fail_errno(IBEX_ERR_SYSTEM, EIO, "while %s", ibex_last_error());
    const std::string d = ibex_last_error();
    EXPECT_EQ(d.rfind("while opening x: ", 0), 0u) << d;
    EXPECT_NE(d.find("(errno 2)"), std::string::npos) << d;
    EXPECT_NE(d.find("(errno 5)"), std::string::npos) << d;
}

TEST(StatusDetail, ALongDetailIsCutNotOverrun) {
    const std::string longer(2000, 'x');
    EXPECT_EQ(ibex::fail(IBEX_ERR_INTERNAL, "%s", longer.c_str()), IBEX_ERR_INTERNAL);
    const std::string d = ibex_last_error();
    EXPECT_GT(d.size(), 400u);
    EXPECT_LT(d.size(), 2000u);
    EXPECT_EQ(d.find_first_not_of('x'), std::string::npos);
}

} // namespace
