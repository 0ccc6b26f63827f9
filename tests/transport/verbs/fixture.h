// Fixture sysfs roots under tests/data/verbs (see its README.md).
#pragma once

#include <memory>
#include <string>

#include "runtime/base/rootfs.h"
#include "tests/support/paths.h"

namespace ibex::verbs::test {

inline std::unique_ptr<ibex::RootFs> fixture_root(const char *name) {
    return std::make_unique<ibex::RootFs>(ibex::test::test_data_dir() + "/verbs/" + name);
}

} // namespace ibex::verbs::test
