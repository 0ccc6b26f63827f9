// IBEX_* environment configuration. Every variable ibex reads is listed in README.md.
// A malformed value is reported once (warn) and the default is used.
#pragma once

#include <cstdint>

namespace ibex::config {

const char *get_string(const char *name, const char *fallback);
int64_t get_int(const char *name, int64_t fallback, int64_t min, int64_t max);
double get_double(const char *name, double fallback, double min, double max);
bool get_bool(const char *name, bool fallback);

} // namespace ibex::config
