// Test helper: one RC endpoint (context, PD, CQ, QP and a registered buffer) over the
// soft provider (qp_endpoint.h), plus small wrappers that fail the test with
// ibex_last_error() text.
#pragma once

#include <gtest/gtest.h>
#include <ibex/ibex.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unistd.h>
#include <vector>

#include "tests/support/qp_endpoint.h"

namespace ibex::test {

// The device tests open: IBEX_TEST_DEVICE, else "udp:lo". "{pid}" in it becomes the test
// process's id, so parallel tests get their own memif socket (dpdk:memif:/tmp/x-{pid}.sock).
// Resolved at static initialisation, before any test forks, so children agree with it.
inline std::string resolve_test_device() {
    const char *env = std::getenv("IBEX_TEST_DEVICE");
    std::string d = env && *env ? env : "udp:lo";
    for (size_t at; (at = d.find("{pid}")) != std::string::npos;) d.replace(at, 5, std::to_string(getpid()));
    return d;
}
inline const std::string kTestDevice = resolve_test_device();
inline const char *test_device() { return kTestDevice.c_str(); }
// False where one of two contexts of one process cannot be closed and opened again while
// the other stays (dpdk memif: both ends of one socket in one process).
inline bool test_device_reopens() { return kTestDevice.compare(0, 10, "dpdk:memif") != 0; }

// False where the device has no fault injection (shm: nothing is lost between processes
// of one host, so loss, reordering and recovery from them do not apply).
inline bool injects_faults(ibex_context_t *ctx) {
    ibex_fault_config_t none = IBEX_FAULT_CONFIG_INIT;
    return ibex_set_faults(ctx, &none) != IBEX_ERR_NOT_SUPPORTED;
}
// The same for test_device(), without opening it (a dpdk context in the parent would start
// EAL before a test forks): shm is the one provider without fault injection.
inline bool test_device_injects_faults() { return kTestDevice != "shm"; }

#define IBEX_ASSERT_OK(expr)                                                                          \
    do {                                                                                              \
        ibex_status_t _st = (expr);                                                                   \
        ASSERT_EQ(_st, IBEX_OK) << #expr << ": " << ibex_strerror(_st) << ": " << ibex_last_error();  \
    } while (0)

struct Endpoint : QpEndpoint {
    // Opens on the test device unless told otherwise; a failure fails the test.
    void open(size_t bytes, const char *device = nullptr, int cqe = 4096) {
        IBEX_ASSERT_OK(QpEndpoint::open(bytes, device ? device : test_device(), nullptr, cqe));
    }
    ibex_ep_addr_t addr() {
        ibex_ep_addr_t a{};
        EXPECT_EQ(local_addr(&a), IBEX_OK);
        return a;
    }
    ibex_counters_t counters() {
        ibex_counters_t c{};
        EXPECT_EQ(query_counters(&c), IBEX_OK) << ibex_last_error();
        return c;
    }
    ibex_qp_state_t qp_state() {
        ibex_qp_attr_t a = IBEX_QP_ATTR_INIT;
        EXPECT_EQ(ibex_query_qp(qp, &a), IBEX_OK) << ibex_last_error();
        return a.qp_state;
    }
};

inline void connect_pair(Endpoint &a, Endpoint &b) { IBEX_ASSERT_OK(connect_endpoints(a, b)); }

} // namespace ibex::test
