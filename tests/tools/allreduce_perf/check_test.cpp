// The #wrong column: results built with the plain reference of the kernel tests from every
// rank's input count as right, and each corrupted element counts once.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "tests/allreduce/cpu/reduce_reference.h"
#include "tools/ibex_allreduce_perf/check.h"

namespace {

using namespace ibex::collperf;
namespace ref = ibex::test::ref;

// What the collective must leave on `rank`, from the reference arithmetic.
std::vector<uint8_t> reference_result(const CheckSpec &s, size_t inputs_per_rank) {
    const size_t sz = ibex_datatype_size(s.type);
    std::vector<std::vector<uint8_t>> in(static_cast<size_t>(s.nranks), std::vector<uint8_t>(inputs_per_rank * sz));
    for (int r = 0; r < s.nranks; ++r) fill_input(in[static_cast<size_t>(r)].data(), inputs_per_rank, s.type, s.op, r);
    std::vector<uint8_t> out(s.count * sz);
    auto reduced = [&](size_t i, uint8_t *dst) {
        std::memcpy(dst, &in[0][i * sz], sz);
        for (int r = 1; r < s.nranks; ++r) ref::element(s.type, s.op, dst, dst, &in[static_cast<size_t>(r)][i * sz]);
        if (s.op == IBEX_AVG) ref::divide(s.type, dst, s.nranks);
    };
    for (size_t i = 0; i < s.count; ++i) {
        uint8_t *dst = &out[i * sz];
        switch (s.coll) {
        case Coll::allreduce:
        case Coll::reduce: reduced(i, dst); break;
        case Coll::reduce_scatter: reduced(static_cast<size_t>(s.rank) * s.count + i, dst); break;
        case Coll::allgather: {
            const size_t per = s.count / static_cast<size_t>(s.nranks);
            std::memcpy(dst, &in[i / per][(i % per) * sz], sz);
            break;
        }
        case Coll::broadcast: std::memcpy(dst, &in[static_cast<size_t>(s.root)][i * sz], sz); break;
        case Coll::alltoall: {
            // block q: rank q's elements for this rank
            const size_t per = s.count / static_cast<size_t>(s.nranks);
            std::memcpy(dst, &in[i / per][(static_cast<size_t>(s.rank) * per + i % per) * sz], sz);
            break;
        }
        case Coll::sendrecv: std::memcpy(dst, &in[static_cast<size_t>((s.rank + s.nranks - 1) % s.nranks)][i * sz], sz); break;
        }
    }
    return out;
}

TEST(CollPerfCheck, ReferenceResultsPassAndCorruptionIsCounted) {
    for (int t = 0; t < IBEX_DATATYPE_COUNT; ++t) {
        for (int op = 0; op < IBEX_REDOP_COUNT; ++op) {
            for (int n : {1, 3, 8}) {
                const auto type = static_cast<ibex_datatype_t>(t);
                const auto rop = static_cast<ibex_redop_t>(op);
                SCOPED_TRACE(std::string(ibex_datatype_name(type)) + " " + ibex_redop_name(rop) + " n=" + std::to_string(n));
                const size_t per = 37;
                const CheckSpec specs[] = {
                    {Coll::allreduce, type, rop, n - 1, n, 0, per},
                    {Coll::reduce_scatter, type, rop, n / 2, n, 0, per},
                    {Coll::allgather, type, rop, 0, n, 0, per * static_cast<size_t>(n)},
                    {Coll::broadcast, type, rop, 0, n, n - 1, per},
                    {Coll::reduce, type, rop, n / 2, n, n / 2, per},
                    {Coll::alltoall, type, rop, n / 2, n, 0, per * static_cast<size_t>(n)},
                    {Coll::sendrecv, type, rop, n / 2, n, 0, per},
                };
                for (const CheckSpec &s : specs) {
                    const size_t inputs =
                        s.coll == Coll::reduce_scatter || s.coll == Coll::alltoall ? per * static_cast<size_t>(n) : per;
                    std::vector<uint8_t> got = reference_result(s, inputs);
                    ASSERT_EQ(count_wrong(got.data(), s), 0) << coll_name(s.coll);
                    const size_t sz = ibex_datatype_size(type);
                    got[3 * sz] ^= 0x01; // lowest bit of element 3
                    got[(s.count - 1) * sz + sz - 1] ^= 0x40; // a high bit of the last element
                    EXPECT_EQ(count_wrong(got.data(), s), 2) << coll_name(s.coll);
                }
            }
        }
    }
}

TEST(CollPerfCheck, ReduceOnANonRootRankHasNothingToCheck) {
    const CheckSpec s{Coll::reduce, IBEX_F32, IBEX_SUM, 1, 3, 0, 16};
    std::vector<uint8_t> garbage(16 * 4, 0xff);
    EXPECT_EQ(count_wrong(garbage.data(), s), 0);
}

} // namespace
