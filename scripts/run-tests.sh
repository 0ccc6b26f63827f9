#!/usr/bin/env bash
# The whole test suite of the build in $IBEX_BUILD_DIR (default build/), two at a time,
# each test under its own timeout and the whole run under TEST_TIMEOUT seconds (default 3600).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${IBEX_BUILD_DIR:-build}
timeout "${TEST_TIMEOUT:-3600}" ctest --test-dir "$BUILD" --output-on-failure -j2 --timeout 600
