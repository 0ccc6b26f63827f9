// A TxPacket copied into one contiguous buffer, for ports that send from memory of their
// own (a DPDK frame, the udp port's send buffer) rather than from the engine's pieces.
#pragma once

#include <cstddef>
#include <cstdint>

#include "transport/soft/codec/icrc.h"
#include "transport/soft/port.h"

namespace ibex::soft {

// The IP/UDP fields a packet from `local` to `dst` has its ICRC made for (IP ID 0).
inline roce::IcrcIpv4Fields tx_icrc_fields(const NetAddr &local, const NetAddr &dst) {
    roce::IcrcIpv4Fields f;
    f.src_ip = local.ip;
    f.src_port = local.port;
    f.dst_ip = dst.ip;
    f.dst_port = dst.port;
    return f;
}

// The pieces one after another into out; returns the bytes copied (p.len).
size_t gather_packet(uint8_t *out, const TxPacket &p);

// A packet with icrc_pending copied into out with its ICRC (for f's addresses, IP ID 0)
// computed from the same loads: one pass over the payload instead of two. The engine's
// pieces are never written. Returns the ICRC (also stored in out's last 4 bytes).
uint32_t copy_with_icrc(uint8_t *out, const TxPacket &p, const roce::IcrcIpv4Fields &f, roce::IcrcPrefixCache &prefix);

} // namespace ibex::soft
