#include "transport/soft/tx_copy.h"

#include <algorithm>
#include <cstring>

#include "transport/soft/codec/crc32_wide.h"
#include "transport/soft/codec/roce.h"

namespace ibex::soft {

size_t gather_packet(uint8_t *out, const TxPacket &p) {
    size_t off = 0;
    for (int i = 0; i < p.npieces; ++i) {
        std::memcpy(out + off, p.pieces[i].iov_base, p.pieces[i].iov_len);
        off += p.pieces[i].iov_len;
    }
    return off;
}

uint32_t copy_with_icrc(uint8_t *out, const TxPacket &p, const roce::IcrcIpv4Fields &f, roce::IcrcPrefixCache &prefix) {
    using roce::kBthLen;
    using roce::kIcrcLen;
    const size_t covered = p.len - kIcrcLen;
    uint32_t icrc;
    if (p.npieces && p.pieces[0].iov_len >= kBthLen) {
        // The engine's first piece holds the BTH and its extension headers.
        const size_t head = std::min(p.pieces[0].iov_len, covered);
        std::memcpy(out, p.pieces[0].iov_base, head);
        icrc = prefix.begin(f, out, head, covered);
        size_t off = head;
        for (int i = 1; i < p.npieces && off < covered; ++i) {
            const size_t n = std::min(p.pieces[i].iov_len, covered - off);
            icrc = roce::crc32_copy(icrc, out + off, p.pieces[i].iov_base, n);
            off += n;
        }
    } else {
        gather_packet(out, p);
        const iovec whole{out, covered};
        icrc = roce::icrc_ipv4(f, std::span<const iovec>(&whole, 1), covered);
    }
    roce::store_icrc(out + covered, icrc);
    return icrc;
}

} // namespace ibex::soft
