// The switch buffer's accounting: the pool left after the reserves, a queue's limit, and
// the reserve that keeps room for a quiet port while another fills the pool.
#include <gtest/gtest.h>

#include "congestion/switch/shared_buffer.h"

using namespace ibex::cc;

namespace {

SharedBuffer two_ports(uint64_t total, uint64_t reserve) {
    SharedBuffer b(total, reserve);
    b.add_port();
    b.add_port();
    return b;
}

} // namespace

TEST(SharedBuffer, PoolIsWhatTheReservesLeave) {
    const SharedBuffer b = two_ports(64 * 1024, 16 * 1024);
    EXPECT_EQ(b.shared_size(), 32u * 1024);
    EXPECT_EQ(b.port_limit(), 48u * 1024);
    // Reserves beyond the buffer leave no pool, and a queue only its reserve.
    const SharedBuffer tight = two_ports(16 * 1024, 16 * 1024);
    EXPECT_EQ(tight.shared_size(), 0u);
    EXPECT_EQ(tight.port_limit(), 16u * 1024);
}

TEST(SharedBuffer, AQueueTakesItsReserveFirstThenThePool) {
    SharedBuffer b = two_ports(64 * 1024, 16 * 1024);
    b.take(0, 10 * 1024);
    EXPECT_EQ(b.shared_used(), 0u); // within the reserve
    b.take(10 * 1024, 10 * 1024);
    EXPECT_EQ(b.shared_used(), 4u * 1024); // 20 KiB: 4 KiB beyond the reserve
    EXPECT_EQ(b.used(), 20u * 1024);
    b.give_back(20 * 1024, 10 * 1024);
    EXPECT_EQ(b.shared_used(), 0u);
    b.give_back(10 * 1024, 10 * 1024);
    EXPECT_EQ(b.used(), 0u);
}

TEST(SharedBuffer, ReserveKeepsRoomForAQuietPortWhenThePoolIsFull) {
    SharedBuffer b = two_ports(64 * 1024, 16 * 1024);
    uint64_t hot = 0;
    while (b.admits(hot, 1024)) b.take(hot, 1024), hot += 1024;
    EXPECT_EQ(hot, b.port_limit());
    EXPECT_EQ(b.shared_used(), b.shared_size());
    // The other port (the ACKs and CNPs going back) still has its whole reserve.
    uint64_t quiet = 0;
    while (b.admits(quiet, 64)) b.take(quiet, 64), quiet += 64;
    EXPECT_EQ(quiet, 16u * 1024);
    EXPECT_EQ(b.used(), 64u * 1024);
}
