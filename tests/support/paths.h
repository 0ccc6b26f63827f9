// Where tests find their data, the team's shared/ folder and the build tree: the
// environment (IBEX_TEST_DATA, IBEX_SHARED_DIR, IBEX_BUILD_DIR) wins, else the paths
// compiled in by ibex_add_gtest.
#pragma once

#include <cstdlib>
#include <string>

namespace ibex::test {

inline std::string env_or(const char *name, const char *fallback) {
    const char *v = std::getenv(name);
    return (v && *v) ? v : fallback;
}
inline std::string test_data_dir() { return env_or("IBEX_TEST_DATA", IBEX_TEST_DATA_DIR); }
inline std::string shared_dir() { return env_or("IBEX_SHARED_DIR", IBEX_SHARED_DIR_DEFAULT); }
inline std::string build_dir() { return env_or("IBEX_BUILD_DIR", IBEX_BUILD_DIR_DEFAULT); }

} // namespace ibex::test
