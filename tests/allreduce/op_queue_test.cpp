// The stream's ring of queued ops (allreduce/op_queue.h): first in, first out across its
// growth and its wrap-around, and draining empties it in order.
#include <gtest/gtest.h>

#include <vector>

#include "allreduce/op_queue.h"

namespace {

using ibex::coll::Op;
using ibex::coll::OpQueue;

Op numbered(size_t n) {
    Op op;
    op.args.count = n;
    return op;
}

TEST(OpQueue, FirstInFirstOutThroughGrowthAndWrapAround) {
    OpQueue q;
    EXPECT_TRUE(q.empty());
    size_t pushed = 0, popped = 0;
    // Keep a few in flight while the head walks round the ring, then grow it while the
    // live range is wrapped, then drain.
    for (int round = 0; round < 40; ++round) {
        for (int i = 0; i < 3; ++i) q.push_back(numbered(pushed++));
        for (int i = 0; i < 2; ++i) {
            ASSERT_EQ(q.front().args.count, popped++);
            q.pop_front();
        }
    }
    EXPECT_EQ(q.size(), pushed - popped);
    while (!q.empty()) {
        ASSERT_EQ(q.front().args.count, popped++);
        q.pop_front();
    }
    EXPECT_EQ(popped, pushed);
}

TEST(OpQueue, DrainIntoKeepsTheOrderAndEmpties) {
    OpQueue q;
    for (size_t i = 0; i < 5; ++i) q.push_back(numbered(i));
    q.pop_front();
    for (size_t i = 5; i < 40; ++i) q.push_back(numbered(i));
    std::vector<Op> out{numbered(99)};
    q.drain_into(&out);
    EXPECT_TRUE(q.empty());
    ASSERT_EQ(out.size(), 39u);
    for (size_t i = 0; i < out.size(); ++i) EXPECT_EQ(out[i].args.count, i + 1);
    q.push_back(numbered(7)); // still usable
    EXPECT_EQ(q.front().args.count, 7u);
}

} // namespace
