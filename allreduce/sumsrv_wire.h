// The summation service's wire format (tools/ibex_sumsrv and allreduce/sumsrv_client.h):
// what a worker and a server say over their TCP control connection, and the header at the
// start of every slot that a push or a result lands in. All fields are big-endian.
//
// Control frames are kFrameBytes long:
//   hello    (worker -> server, once): job key, world size, rank, the slot geometry, the
//            worker's QP address and its result slots (address, rkey), and its device;
//   welcome  (server -> worker): the server's QP address and its push slots for this
//            worker; or refused, with the reason;
//   failed   (server -> worker, then the server closes): the job failed, with the reason.
//
// Data moves over an RC QP per worker and server. Chunk j of an allreduce's partition lands
// in slot j % slots: the worker WRITEs_WITH_IMM [header | payload] into its push slot on the
// server (immediate = the connection's running chunk sequence); once the server holds chunk
// j from every worker it sums them, in rank order, and WRITEs_WITH_IMM [header | sum] into
// every worker's result slot, with the same immediate.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include <ibex/ibex.h>

namespace ibex::coll::sumsrv {

inline constexpr uint32_t kFrameMagic = 0x49425853;  // "IBXS"
inline constexpr uint32_t kPushMagic = 0x49425850;   // "IBXP"
inline constexpr uint32_t kResultMagic = 0x49425852; // "IBXR"
inline constexpr uint16_t kVersion = 1;
inline constexpr size_t kFrameBytes = 256;
inline constexpr size_t kSlotHeaderBytes = 64;
inline constexpr size_t kJobBytes = 64;     // job key, NUL-padded
inline constexpr size_t kDeviceBytes = 96;  // device name, NUL-padded
inline constexpr size_t kTextBytes = 192;   // a reply's reason, NUL-padded
inline constexpr uint32_t kMaxSlots = 64;

enum class Kind : uint16_t { hello = 1, welcome = 2, refused = 3, failed = 4 };

struct Hello {
    std::string job;
    uint32_t nranks = 0, rank = 0;
    uint32_t chunk_bytes = 0, slots = 0;
    uint64_t result_addr = 0; // the worker's result slots
    uint32_t result_rkey = 0;
    ibex_ep_addr_t ep{};
    std::string device;
};

// welcome, refused or failed.
struct Reply {
    Kind kind = Kind::welcome;
    uint64_t push_addr = 0; // this worker's push slots on the server
    uint32_t push_rkey = 0;
    ibex_ep_addr_t ep{};
    std::string text; // refused / failed: why
};

void encode_hello(const Hello &h, uint8_t *frame);
// false with *why when the frame is not a hello of this version, or its fields are absurd.
bool decode_hello(const uint8_t *frame, Hello *h, std::string *why);
void encode_reply(const Reply &r, uint8_t *frame);
bool decode_reply(const uint8_t *frame, Reply *r, std::string *why);

// At the start of each slot. status: 0, or 1 with the reason as the payload (text).
struct SlotHeader {
    uint32_t magic = 0;
    uint32_t seq = 0;
    uint32_t bytes = 0; // payload
    uint8_t type = 0;   // ibex_datatype_t
    uint8_t op = 0;     // ibex_redop_t
    uint8_t status = 0;
};

void put_slot_header(uint8_t *slot, const SlotHeader &h);
SlotHeader get_slot_header(const uint8_t *slot);

inline size_t slot_stride(uint32_t chunk_bytes) { return kSlotHeaderBytes + chunk_bytes; }

// Posts a signaled WRITE_WITH_IMM of [addr, addr + bytes) (one slot: header and payload)
// to remote_addr under rkey: how a push and a sum both travel.
ibex_status_t post_slot_write(ibex_qp_t *qp, uint64_t wr_id, const void *addr, uint32_t bytes, uint32_t lkey,
                              uint64_t remote_addr, uint32_t rkey, uint32_t imm);

// Opens `device` for the service's QPs. A udp device on a NIC's address whose RoCEv2 port
// is taken (the communicator's own context, another job's) moves to the next free UDP
// port above it: the QP addresses carry the port, so peers still reach it.
ibex_status_t open_context(const std::string &device, ibex_context_t **ctx);

} // namespace ibex::coll::sumsrv
