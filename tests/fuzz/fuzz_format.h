// Input format of the receive-path fuzz target, shared by the target and the seed
// generator.
//
// An input is a sequence of records, each one packet handed to SoftContext::receive():
//
//   byte 0  ctl   bit flags, see kCtl* below
//   byte 1  sel   which QP the packet goes to: sel % 4 = 0 -> QP A (requester with
//                 outstanding WQEs, MTU 1024), 1 -> QP B (responder, MTU 256),
//                 2 -> QP C (RTR only, MTU 4096, remote write only), 3 -> keep the
//                 packet's own destination QP (usually unknown)
//   byte 2  delta signed PSN offset used with kCtlPatchPsn
//   byte 3-4 len  big-endian length of the packet that follows (clamped to what is left)
//   len bytes     the RoCEv2 transport packet, BTH first, ICRC last
//
// Records are processed in order against one freshly built context per input, so
// multi-packet messages and request/response sequences can be expressed.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ibex::fuzz {

inline constexpr uint32_t kLocalIp = 0x0a000001; // 10.0.0.1, the fuzzed context
inline constexpr uint32_t kPeerIp = 0x0a000002;  // 10.0.0.2, every QP's peer
inline constexpr uint16_t kPort = 4791;
inline constexpr uint32_t kPeerQpn = 0x000abc; // QP A's peer; B's is +1, C's +2

inline constexpr size_t kRecordHeader = 5;
inline constexpr size_t kMaxRecords = 64;

enum Ctl : uint8_t {
    kCtlRaw = 1 << 0,       // feed the bytes as they are; otherwise the ICRC is recomputed and patched
    kCtlPatchPsn = 1 << 1,  // PSN := (request ? QP's expected PSN : QP's oldest unacked PSN) + delta
    kCtlPatchKey = 1 << 2,  // RETH/AtomicETH: R_Key := a live region's key, VA := its base + (VA & 0xffff) - 64
    kCtlLocalMr = 1 << 3,   // with kCtlPatchKey: use the region without remote rights
    kCtlWrongSrc = 1 << 4,  // arrive from another UDP source port than the QP's peer
    kCtlCeMark = 1 << 5,    // IP ECN = CE
    kCtlPollCq = 1 << 6,    // drain the CQ through ibex_poll_cq after this packet
    kCtlNoProgress = 1 << 7 // do not run progress_once() after this packet
};

enum Sel : uint8_t { kSelA = 0, kSelB = 1, kSelC = 2, kSelRaw = 3 };

// QP setup (the seeds rely on it).
inline constexpr uint32_t kPsnA = 0x000100;    // QP A's first send PSN
inline constexpr uint32_t kRqPsn = 0xfffff0;   // PSN every QP expects first (wraps soon)
inline constexpr size_t kRegionLen = 64 * 1024;
inline constexpr size_t kGuardLen = 4096;
inline constexpr uint32_t kVaBias = 64;        // kCtlPatchKey: VA = base + low16 - kVaBias

// QP A's outstanding work, in PSN order from kPsnA (MTU 1024):
//   SEND 1500 B (2 PSNs), RDMA WRITE 100 B (1), RDMA READ 2500 B (3: 1024+1024+452),
//   CMP_SWAP (1), FETCH_ADD (1), SEND_WITH_IMM 10 B (1)
inline constexpr uint32_t kAReadLen = 2500;

} // namespace ibex::fuzz
