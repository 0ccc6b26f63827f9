// Internal error reporting: every failing C API path records a per-thread detail string
// and returns the status, so callers see both ibex_strerror(status) and ibex_last_error().
#pragma once

#include <ibex/ibex.h>

namespace ibex {

// Records the detail for this thread and returns the status unchanged.
ibex_status_t fail(ibex_status_t status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
// As fail(), appending ": <strerror(errno_value)> (errno N)".
ibex_status_t fail_errno(ibex_status_t status, int errno_value, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void clear_error();

} // namespace ibex

// Propagates a failure: evaluates expr (an ibex_status_t) once and returns it from the
// enclosing function unless it is IBEX_OK. Whoever failed has already recorded the detail
// string, so the caller adds nothing and loses nothing.
#define IBEX_TRY(expr)                                                                             \
    do {                                                                                           \
        if (const ibex_status_t ibex_try_status_ = (expr); ibex_try_status_ != IBEX_OK)           \
            return ibex_try_status_;                                                               \
    } while (0)
