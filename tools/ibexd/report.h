// Human-readable text for plans and passes: what ibexd changed, what it could not, and
// why. Kept apart from the daemon so the tool, the logs and the tests print the same.
#pragma once

#include "tools/ibexd/applier.h"
#include "tools/ibexd/planner.h"

#include <string>

namespace ibex::tuning {

// Per interface: its cores and queues, then one line per file.
// include_unchanged: list files that already had the wanted value too.
std::string format_report(const Plan &plan, const PassResult &result, bool include_unchanged);
std::string format_summary(const PassResult &result);

} // namespace ibex::tuning
