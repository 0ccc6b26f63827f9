// The smallest traffic a dpdk port test needs: one 64-byte frame to a RoCE port.
#pragma once

#include <cstdint>

#include "transport/soft/port.h"

namespace ibex::test {

// A frame of the 64 bytes at `bytes` to dst_ip's RoCE port.
inline soft::TxPacket small_frame(uint8_t *bytes, uint32_t dst_ip) {
    soft::TxPacket p;
    p.dst = {dst_ip, 4791};
    p.pieces[0] = {bytes, 64};
    p.npieces = 1;
    p.len = 64;
    return p;
}

} // namespace ibex::test
