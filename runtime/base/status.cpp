#include "runtime/base/status.h"

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>

namespace ibex {
namespace {
thread_local char t_detail[512];
} // namespace

// Formatted apart and then copied: callers pass the detail they are wrapping
// ("connecting to rank 1: %s", ibex_last_error()), which is t_detail itself, and vsnprintf
// may not read the buffer it writes.
ibex_status_t fail(ibex_status_t status, const char *fmt, ...) {
    char text[sizeof t_detail];
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    std::memcpy(t_detail, text, sizeof text);
    return status;
}

ibex_status_t fail_errno(ibex_status_t status, int errno_value, const char *fmt, ...) {
    char text[sizeof t_detail];
    va_list ap;
    va_start(ap, fmt);
    const int n = std::vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    if (n >= 0 && static_cast<size_t>(n) < sizeof text) {
        char buf[128];
        const char *msg = strerror_r(errno_value, buf, sizeof buf);
        std::snprintf(text + n, sizeof text - n, ": %s (errno %d)", msg, errno_value);
    }
    std::memcpy(t_detail, text, sizeof text);
    return status;
}

void clear_error() { t_detail[0] = '\0'; }

} // namespace ibex

extern "C" {

const char *ibex_strerror(ibex_status_t status) {
    switch (status) {
    case IBEX_OK: return "success";
    case IBEX_ERR_INVALID_ARGUMENT: return "invalid argument";
    case IBEX_ERR_NOT_SUPPORTED: return "operation not supported by this provider";
    case IBEX_ERR_NO_DEVICE: return "no such device";
    case IBEX_ERR_NO_MEMORY: return "out of memory";
    case IBEX_ERR_INVALID_STATE: return "invalid state for this operation";
    case IBEX_ERR_QUEUE_FULL: return "queue full";
    case IBEX_ERR_SYSTEM: return "system call failed";
    case IBEX_ERR_TIMEOUT: return "timed out";
    case IBEX_ERR_REMOTE: return "remote peer failed";
    case IBEX_ERR_ADDRESS_IN_USE: return "address in use";
    case IBEX_ERR_INTERNAL: return "internal error";
    }
    return "unknown status";
}

const char *ibex_last_error(void) { return ibex::t_detail; }

int ibex_version(void) { return IBEX_VERSION; }

const char *ibex_version_string(void) {
#define IBEX_STR2(x) #x
#define IBEX_STR(x) IBEX_STR2(x)
    return IBEX_STR(IBEX_VERSION_MAJOR) "." IBEX_STR(IBEX_VERSION_MINOR) "." IBEX_STR(IBEX_VERSION_PATCH);
}

const char *ibex_wc_status_str(ibex_wc_status_t status) {
    switch (status) {
    case IBEX_WC_SUCCESS: return "IBV_WC_SUCCESS";
    case IBEX_WC_LOC_LEN_ERR: return "IBV_WC_LOC_LEN_ERR";
    case IBEX_WC_LOC_QP_OP_ERR: return "IBV_WC_LOC_QP_OP_ERR";
    case IBEX_WC_LOC_EEC_OP_ERR: return "IBV_WC_LOC_EEC_OP_ERR";
    case IBEX_WC_LOC_PROT_ERR: return "IBV_WC_LOC_PROT_ERR";
    case IBEX_WC_WR_FLUSH_ERR: return "IBV_WC_WR_FLUSH_ERR";
    case IBEX_WC_MW_BIND_ERR: return "IBV_WC_MW_BIND_ERR";
    case IBEX_WC_BAD_RESP_ERR: return "IBV_WC_BAD_RESP_ERR";
    case IBEX_WC_LOC_ACCESS_ERR: return "IBV_WC_LOC_ACCESS_ERR";
    case IBEX_WC_REM_INV_REQ_ERR: return "IBV_WC_REM_INV_REQ_ERR";
    case IBEX_WC_REM_ACCESS_ERR: return "IBV_WC_REM_ACCESS_ERR";
    case IBEX_WC_REM_OP_ERR: return "IBV_WC_REM_OP_ERR";
    case IBEX_WC_RETRY_EXC_ERR: return "IBV_WC_RETRY_EXC_ERR";
    case IBEX_WC_RNR_RETRY_EXC_ERR: return "IBV_WC_RNR_RETRY_EXC_ERR";
    case IBEX_WC_LOC_RDD_VIOL_ERR: return "IBV_WC_LOC_RDD_VIOL_ERR";
    case IBEX_WC_REM_INV_RD_REQ_ERR: return "IBV_WC_REM_INV_RD_REQ_ERR";
    case IBEX_WC_REM_ABORT_ERR: return "IBV_WC_REM_ABORT_ERR";
    case IBEX_WC_INV_EECN_ERR: return "IBV_WC_INV_EECN_ERR";
    case IBEX_WC_INV_EEC_STATE_ERR: return "IBV_WC_INV_EEC_STATE_ERR";
    case IBEX_WC_FATAL_ERR: return "IBV_WC_FATAL_ERR";
    case IBEX_WC_RESP_TIMEOUT_ERR: return "IBV_WC_RESP_TIMEOUT_ERR";
    case IBEX_WC_GENERAL_ERR: return "IBV_WC_GENERAL_ERR";
    }
    return "IBV_WC_UNKNOWN";
}

} // extern "C"
