// How a RoCEv2 packet's ICRC changes with the IPv4 Identification field, which the ICRC
// covers. A UDP GSO train leaves as one datagram with IP ID 0 and is cut into segments
// that carry IDs 0, 1, 2, ... (the kernel's software GSO on a DF-set, unconnected socket),
// so the sender must make segment k's ICRC for ID k, and a receiver on a socket, which
// never sees the IP header, must find out which ID a segment was sent with.
//
// CRC-32 is linear: two packets of equal length that differ only in the ID, by id_xor,
// have ICRCs that differ by a value that depends only on id_xor and on the number of
// bytes the CRC covers after the ID. That value is the shift below; no payload byte is
// read again.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ibex::roce {

class IcrcIpIdShift {
public:
    // What to XOR into the ICRC of a packet whose transport bytes (BTH .. pad, ICRC not
    // included) are transport_len long to change its IP ID by id_xor.
    uint32_t delta(uint16_t id_xor, size_t transport_len);

    // The id_xor in [1, limit) whose delta() is `diff`, or 0 if there is none (limit at
    // most 4096). For a receiver that checked a packet's ICRC for a guessed ID: the
    // sender's ID was guess ^ the result.
    uint16_t find(uint32_t diff, size_t transport_len, unsigned limit);

private:
    void prepare(size_t transport_len);

    size_t len_ = SIZE_MAX;
    uint32_t shift_ = 0;    // x^(8 * bytes after the ID) mod the CRC polynomial
    uint32_t basis_[16]{};  // delta(1 << i) for this length
};

} // namespace ibex::roce
