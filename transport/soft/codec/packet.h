// Parsing of a received RoCEv2 transport packet (BTH .. ICRC) into a view of its
// headers and payload. Parsing never allocates and never trusts a length field.
#pragma once

#include <cstddef>
#include <cstdint>

#include "transport/soft/codec/roce.h"

namespace ibex::roce {

enum class ParseError : uint8_t {
    kOk = 0,
    kTooShort,
    kUnknownOpcode,
    kBadVersion,
    kBadPad,
};

struct PacketView {
    Bth bth;
    uint16_t flags = 0; // OpInfo flags of the opcode
    Reth reth;
    Aeth aeth;
    uint32_t imm = 0;
    AtomicEth atomic;
    uint64_t atomic_orig = 0;
    const uint8_t *payload = nullptr;
    uint32_t payload_len = 0; // without pad
    uint32_t icrc = 0;        // as carried (little-endian on the wire)
    size_t transport_len = 0; // BTH .. pad, i.e. what the ICRC covers after the IP/UDP part
};

// `data`/`len`: the UDP payload (BTH first, ICRC last).
ParseError parse_packet(const uint8_t *data, size_t len, PacketView *out);

} // namespace ibex::roce
