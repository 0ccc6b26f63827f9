// Enum fields as a C caller may fill them (runtime/base/c_enum.h): any int, read back as an
// int without a load of the enum type, and the range checks refuse what is outside.
#include <climits>
#include <cstring>

#include <gtest/gtest.h>

#include "ibex/coll.h"
#include "runtime/base/c_enum.h"

namespace {

// What a C caller's `op.type = 77;` leaves in the field: the bytes, not a C++ enum value.
template <class E> E from_c(int v) {
    E e;
    std::memcpy(&e, &v, sizeof e);
    return e;
}

TEST(CEnum, ReadsWhateverIntTheCallerStored) {
    for (int v : {0, 5, 77, -1, INT_MIN, INT_MAX}) {
        const ibex_p2p_op_t op{.kind = IBEX_P2P_SEND, .type = from_c<ibex_datatype_t>(v)};
        EXPECT_EQ(ibex::c_enum_value(op.type), v);
    }
}

TEST(CEnum, BelowTakesZeroToCountLessOne) {
    EXPECT_TRUE(ibex::c_enum_below(IBEX_U8, IBEX_DATATYPE_COUNT));
    EXPECT_TRUE(ibex::c_enum_below(from_c<ibex_datatype_t>(IBEX_DATATYPE_COUNT - 1), IBEX_DATATYPE_COUNT));
    for (int bad : {static_cast<int>(IBEX_DATATYPE_COUNT), 77, -1, INT_MIN, INT_MAX})
        EXPECT_FALSE(ibex::c_enum_below(from_c<ibex_datatype_t>(bad), IBEX_DATATYPE_COUNT)) << bad;
}

TEST(CEnum, InTakesFirstToLast) {
    EXPECT_TRUE(ibex::c_enum_in(IBEX_P2P_SEND, IBEX_P2P_SEND, IBEX_P2P_RECV));
    EXPECT_TRUE(ibex::c_enum_in(IBEX_P2P_RECV, IBEX_P2P_SEND, IBEX_P2P_RECV));
    for (int bad : {2, 3, -1, INT_MAX})
        EXPECT_FALSE(ibex::c_enum_in(from_c<ibex_p2p_kind_t>(bad), IBEX_P2P_SEND, IBEX_P2P_RECV)) << bad;
}

} // namespace
