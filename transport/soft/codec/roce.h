// RoCEv2 transport headers (InfiniBand BTH and extended headers) as they appear on the
// wire after the UDP header. Big-endian fields are read and written byte by byte, so the
// code is alignment- and host-order-independent; everything here is inline and
// allocation-free because it runs per packet.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "runtime/base/byte_order.h"

namespace ibex::roce {

inline constexpr uint16_t kUdpPort = 4791;
inline constexpr uint16_t kDefaultPkey = 0xffff;
inline constexpr uint32_t kPsnMask = 0xffffff;
inline constexpr uint32_t kQpnMask = 0xffffff;

inline constexpr size_t kBthLen = 12;
inline constexpr size_t kRethLen = 16;
inline constexpr size_t kAethLen = 4;
inline constexpr size_t kImmLen = 4;
inline constexpr size_t kAtomicEthLen = 28;
inline constexpr size_t kAtomicAckEthLen = 8;
inline constexpr size_t kIcrcLen = 4;
inline constexpr size_t kCnpPayloadLen = 16;
inline constexpr size_t kMaxHeaderLen = kBthLen + kAtomicEthLen; // longest BTH + extensions

// RC opcodes (UC uses 0x20 | low bits for SEND/WRITE).
enum Opcode : uint8_t {
    kSendFirst = 0x00,
    kSendMiddle = 0x01,
    kSendLast = 0x02,
    kSendLastImm = 0x03,
    kSendOnly = 0x04,
    kSendOnlyImm = 0x05,
    kWriteFirst = 0x06,
    kWriteMiddle = 0x07,
    kWriteLast = 0x08,
    kWriteLastImm = 0x09,
    kWriteOnly = 0x0a,
    kWriteOnlyImm = 0x0b,
    kReadRequest = 0x0c,
    kReadResponseFirst = 0x0d,
    kReadResponseMiddle = 0x0e,
    kReadResponseLast = 0x0f,
    kReadResponseOnly = 0x10,
    kAcknowledge = 0x11,
    kAtomicAcknowledge = 0x12,
    kCompareSwap = 0x13,
    kFetchAdd = 0x14,
    kSendLastInvalidate = 0x16,
    kSendOnlyInvalidate = 0x17,
    kCnp = 0x81,
};

// Which extension headers follow the BTH, and where a packet sits in its message.
enum OpFlags : uint16_t {
    kHasReth = 1 << 0,
    kHasAeth = 1 << 1,
    kHasImm = 1 << 2,
    kHasAtomicEth = 1 << 3,
    kHasAtomicAckEth = 1 << 4,
    kHasPayload = 1 << 5,
    kFirst = 1 << 6,
    kMiddle = 1 << 7,
    kLast = 1 << 8,
    kIsRequest = 1 << 9,  // carried requester -> responder
    kIsResponse = 1 << 10,
    kIsSend = 1 << 11,
    kIsWrite = 1 << 12,
    kIsRead = 1 << 13,
    kIsAtomic = 1 << 14,
    kValid = 1 << 15,
};

struct OpInfo {
    uint16_t flags;
    const char *name;
};

// Table for every opcode value; flags == 0 marks an opcode ibex does not speak.
const OpInfo &op_info(uint8_t opcode);

inline size_t ext_header_len(uint16_t flags) {
    return ((flags & kHasReth) ? kRethLen : 0) + ((flags & kHasAeth) ? kAethLen : 0) +
           ((flags & kHasImm) ? kImmLen : 0) + ((flags & kHasAtomicEth) ? kAtomicEthLen : 0) +
           ((flags & kHasAtomicAckEth) ? kAtomicAckEthLen : 0);
}

// ---- byte order: the helpers live in the base layer (endpoint addresses use them too)
using ibex::get16;
using ibex::get24;
using ibex::get32;
using ibex::get64;
using ibex::put16;
using ibex::put24;
using ibex::put32;
using ibex::put64;

// ---- PSN arithmetic modulo 2^24
inline uint32_t psn_add(uint32_t psn, uint32_t n) { return (psn + n) & kPsnMask; }
// Signed distance a - b in [-2^23, 2^23): exactly half a turn apart reads as -2^23 both
// ways, as in Linux rxe psn_compare.
inline int32_t psn_diff(uint32_t a, uint32_t b) {
    return static_cast<int32_t>(((a - b) & kPsnMask) << 8) >> 8;
}

// ---- BTH
struct Bth {
    uint8_t opcode = 0;
    bool solicited = false;
    bool mig_req = false;
    uint8_t pad_count = 0; // 0..3
    uint8_t tver = 0;
    uint16_t pkey = kDefaultPkey;
    bool fecn = false;
    bool becn = false;
    uint32_t dest_qp = 0;
    bool ack_req = false;
    // The 7 reserved bits after AckReq: zero on the wire from a standard sender, ignored
    // by a standard receiver. ibex marks a selective NAK with kBthSelectiveNak here.
    uint8_t resv7 = 0;
    uint32_t psn = 0;
};
inline constexpr uint8_t kBthSelectiveNak = 0x01;

inline void encode_bth(uint8_t *p, const Bth &b) {
    p[0] = b.opcode;
    p[1] = uint8_t((b.solicited ? 0x80 : 0) | (b.mig_req ? 0x40 : 0) | ((b.pad_count & 3) << 4) | (b.tver & 0xf));
    put16(p + 2, b.pkey);
    p[4] = uint8_t((b.fecn ? 0x80 : 0) | (b.becn ? 0x40 : 0));
    put24(p + 5, b.dest_qp & kQpnMask);
    p[8] = uint8_t((b.ack_req ? 0x80 : 0) | (b.resv7 & 0x7f));
    put24(p + 9, b.psn & kPsnMask);
}

inline Bth decode_bth(const uint8_t *p) {
    Bth b;
    b.opcode = p[0];
    b.solicited = p[1] & 0x80;
    b.mig_req = p[1] & 0x40;
    b.pad_count = (p[1] >> 4) & 3;
    b.tver = p[1] & 0xf;
    b.pkey = get16(p + 2);
    b.fecn = p[4] & 0x80;
    b.becn = p[4] & 0x40;
    b.dest_qp = get24(p + 5);
    b.ack_req = p[8] & 0x80;
    b.resv7 = p[8] & 0x7f;
    b.psn = get24(p + 9);
    return b;
}

// ---- RETH: virtual address, R_Key, DMA length of the whole message
struct Reth {
    uint64_t va = 0;
    uint32_t rkey = 0;
    uint32_t dma_len = 0;
};
inline void encode_reth(uint8_t *p, const Reth &r) {
    put64(p, r.va);
    put32(p + 8, r.rkey);
    put32(p + 12, r.dma_len);
}
inline Reth decode_reth(const uint8_t *p) { return {get64(p), get32(p + 8), get32(p + 12)}; }

// ---- AETH: syndrome | MSN
enum AethKind : uint8_t { kAethAck = 0x00, kAethRnrNak = 0x20, kAethNak = 0x60 };
enum NakCode : uint8_t {
    kNakPsnSeqError = 0x00,
    kNakInvalidRequest = 0x01,
    kNakRemoteAccess = 0x02,
    kNakRemoteOperational = 0x03,
    kNakInvalidRdRequest = 0x04,
};
inline constexpr uint8_t kAethCreditsUnlimited = 0x1f;

struct Aeth {
    uint8_t syndrome = kAethAck | kAethCreditsUnlimited;
    uint32_t msn = 0;
    AethKind kind() const { return static_cast<AethKind>(syndrome & 0x60); }
    uint8_t value() const { return syndrome & 0x1f; } // credits, RNR timer or NAK code
};
inline void encode_aeth(uint8_t *p, const Aeth &a) {
    p[0] = a.syndrome;
    put24(p + 1, a.msn & 0xffffff);
}
inline Aeth decode_aeth(const uint8_t *p) { return {p[0], get24(p + 1)}; }

// ---- AtomicETH
struct AtomicEth {
    uint64_t va = 0;
    uint32_t rkey = 0;
    uint64_t swap_add = 0;
    uint64_t compare = 0;
};
inline void encode_atomic_eth(uint8_t *p, const AtomicEth &a) {
    put64(p, a.va);
    put32(p + 8, a.rkey);
    put64(p + 12, a.swap_add);
    put64(p + 20, a.compare);
}
inline AtomicEth decode_atomic_eth(const uint8_t *p) { return {get64(p), get32(p + 8), get64(p + 12), get64(p + 20)}; }

// ---- RNR timer codes (AETH low 5 bits) in microseconds
uint32_t rnr_timer_us(uint8_t code);

// ---- path MTU
inline int mtu_bytes(uint8_t mtu_enum) { return (mtu_enum >= 1 && mtu_enum <= 5) ? (128 << mtu_enum) : 0; }
// Largest IB MTU that fits a netdev MTU, as rxe chooses it (netdev MTU - 80, rounded down).
uint8_t mtu_enum_for_netdev(int netdev_mtu);

inline uint8_t pad_for(size_t payload_len) { return static_cast<uint8_t>((4 - (payload_len & 3)) & 3); }

} // namespace ibex::roce
