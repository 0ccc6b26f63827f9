// Leveled logging to stderr, chosen by IBEX_LOG_LEVEL (error, warn, info, debug; default
// warn). Never called per packet.
#pragma once

namespace ibex {

enum class LogLevel { error = 0, warn = 1, info = 2, debug = 3 };

bool log_enabled(LogLevel level);
void log(LogLevel level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

} // namespace ibex

#define IBEX_LOG(level, ...)                                                                        \
    do {                                                                                            \
        if (::ibex::log_enabled(::ibex::LogLevel::level))                                           \
            ::ibex::log(::ibex::LogLevel::level, __VA_ARGS__);                                      \
    } while (0)
