#include "tools/ibex_perftest/perftest.h"

namespace ibex::perftest {

int run_tool(Test t, int argc, char **argv) {
    Options o;
    switch (parse_options(t, argc, argv, &o)) {
    case ParseResult::help: return 0;
    case ParseResult::error: return 1;
    case ParseResult::ok: break;
    }
    return o.is_bw() ? run_bw(o) : run_lat(o);
}

} // namespace ibex::perftest
