#include "runtime/base/log.h"

#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <unistd.h>

#include "runtime/base/config.h"

namespace ibex {
namespace {

LogLevel parse_level() {
    const char *v = config::get_string("IBEX_LOG_LEVEL", "warn");
    if (!std::strcmp(v, "error")) return LogLevel::error;
    if (!std::strcmp(v, "info")) return LogLevel::info;
    if (!std::strcmp(v, "debug")) return LogLevel::debug;
    return LogLevel::warn;
}

const char *level_name(LogLevel l) {
    switch (l) {
    case LogLevel::error: return "error";
    case LogLevel::warn: return "warn";
    case LogLevel::info: return "info";
    case LogLevel::debug: return "debug";
    }
    return "?";
}

} // namespace

bool log_enabled(LogLevel level) {
    static const LogLevel threshold = parse_level();
    return level <= threshold;
}

void log(LogLevel level, const char *fmt, ...) {
    char line[1024];
    int n = std::snprintf(line, sizeof line, "ibex[%d] %s: ", static_cast<int>(getpid()), level_name(level));
    va_list ap;
    va_start(ap, fmt);
    if (n > 0 && static_cast<size_t>(n) < sizeof line) std::vsnprintf(line + n, sizeof line - n, fmt, ap);
    va_end(ap);
    std::fprintf(stderr, "%s\n", line);
}

} // namespace ibex
