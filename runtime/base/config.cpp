#include "runtime/base/config.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <strings.h>

namespace ibex::config {
namespace {

void warn_bad(const char *name, const char *value, const char *why) {
    // Logging may itself read configuration, so report directly.
    std::fprintf(stderr, "ibex warn: %s=\"%s\" ignored (%s); using the default\n", name, value, why);
}

} // namespace

const char *get_string(const char *name, const char *fallback) {
    const char *v = std::getenv(name);
    return (v && *v) ? v : fallback;
}

int64_t get_int(const char *name, int64_t fallback, int64_t min, int64_t max) {
    const char *v = std::getenv(name);
    if (!v || !*v) return fallback;
    errno = 0;
    char *end = nullptr;
    long long x = std::strtoll(v, &end, 0);
    if (errno || *end) {
        warn_bad(name, v, "not an integer");
        return fallback;
    }
    if (x < min || x > max) {
        warn_bad(name, v, "out of range");
        return fallback;
    }
    return x;
}

double get_double(const char *name, double fallback, double min, double max) {
    const char *v = std::getenv(name);
    if (!v || !*v) return fallback;
    errno = 0;
    char *end = nullptr;
    double x = std::strtod(v, &end);
    if (errno || *end) {
        warn_bad(name, v, "not a number");
        return fallback;
    }
    if (!(x >= min && x <= max)) {
        warn_bad(name, v, "out of range");
        return fallback;
    }
    return x;
}

bool get_bool(const char *name, bool fallback) {
    const char *v = std::getenv(name);
    if (!v || !*v) return fallback;
    if (!std::strcmp(v, "1") || !strcasecmp(v, "true") || !strcasecmp(v, "yes") || !strcasecmp(v, "on")) return true;
    if (!std::strcmp(v, "0") || !strcasecmp(v, "false") || !strcasecmp(v, "no") || !strcasecmp(v, "off")) return false;
    warn_bad(name, v, "not a boolean");
    return fallback;
}

} // namespace ibex::config
