#include "transport/soft/codec/packet.h"

#include "transport/soft/codec/icrc.h"

namespace ibex::roce {

ParseError parse_packet(const uint8_t *data, size_t len, PacketView *out) {
    if (len < kBthLen + kIcrcLen) return ParseError::kTooShort;
    out->bth = decode_bth(data);
    const OpInfo &info = op_info(out->bth.opcode);
    if (!(info.flags & kValid)) return ParseError::kUnknownOpcode;
    if (out->bth.tver != 0) return ParseError::kBadVersion;
    out->flags = info.flags;
    const size_t hdr = kBthLen + ext_header_len(info.flags);
    if (out->bth.opcode == kCnp) {
        if (len < kBthLen + kCnpPayloadLen + kIcrcLen) return ParseError::kTooShort;
    }
    if (len < hdr + kIcrcLen) return ParseError::kTooShort;
    const uint8_t *p = data + kBthLen;
    if (info.flags & kHasReth) {
        out->reth = decode_reth(p);
        p += kRethLen;
    }
    if (info.flags & kHasAtomicEth) {
        out->atomic = decode_atomic_eth(p);
        p += kAtomicEthLen;
    }
    if (info.flags & kHasAeth) {
        out->aeth = decode_aeth(p);
        p += kAethLen;
    }
    if (info.flags & kHasAtomicAckEth) {
        out->atomic_orig = get64(p);
        p += kAtomicAckEthLen;
    }
    if (info.flags & kHasImm) {
        out->imm = get32(p);
        p += kImmLen;
    }
    const size_t body = len - hdr - kIcrcLen; // payload + pad
    const uint8_t pad = out->bth.pad_count;
    if (!(info.flags & kHasPayload)) {
        // Packets without payload carry no pad; a CNP carries 16 reserved bytes.
        if (pad != 0) return ParseError::kBadPad;
        out->payload = p;
        out->payload_len = 0;
    } else {
        if (pad > body) return ParseError::kBadPad;
        out->payload = p;
        out->payload_len = static_cast<uint32_t>(body - pad);
    }
    out->transport_len = len - kIcrcLen;
    out->icrc = load_icrc(data + len - kIcrcLen);
    return ParseError::kOk;
}

} // namespace ibex::roce
