#include "allreduce/sumsrv_wire.h"

#include <algorithm>
#include <cstring>

#include "runtime/base/byte_order.h"

namespace ibex::coll::sumsrv {
namespace {

// Frame layout: [0] magic, [4] version, [6] kind, then the kind's fields.
void put_head(uint8_t *f, Kind kind) {
    std::memset(f, 0, kFrameBytes);
    put32(f, kFrameMagic);
    put16(f + 4, kVersion);
    put16(f + 6, static_cast<uint16_t>(kind));
}

bool get_head(const uint8_t *f, Kind *kind, std::string *why) {
    if (get32(f) != kFrameMagic) {
        *why = "not a summation-service frame (bad magic)";
        return false;
    }
    if (get16(f + 4) != kVersion) {
        *why = "protocol version " + std::to_string(get16(f + 4)) + ", this side speaks " + std::to_string(kVersion);
        return false;
    }
    *kind = static_cast<Kind>(get16(f + 6));
    return true;
}

void put_text(uint8_t *at, size_t room, const std::string &s) {
    std::memcpy(at, s.data(), std::min(s.size(), room - 1));
}

std::string get_text(const uint8_t *at, size_t room) {
    const auto *p = reinterpret_cast<const char *>(at);
    return std::string(p, strnlen(p, room));
}

// hello: [8] nranks [12] rank [16] chunk_bytes [20] slots [24] result_addr [32] result_rkey
// [40] ep (28) [68] job (64) [132] device (96) -> 228
constexpr size_t kHelloEp = 40, kHelloJob = 68, kHelloDevice = kHelloJob + kJobBytes;
static_assert(kHelloDevice + kDeviceBytes <= kFrameBytes);
// reply: [8] push_addr [16] push_rkey [20] ep (28) [48] text (192) -> 240
constexpr size_t kReplyEp = 20, kReplyText = 48;
static_assert(kReplyText + kTextBytes <= kFrameBytes);

} // namespace

void encode_hello(const Hello &h, uint8_t *f) {
    put_head(f, Kind::hello);
    put32(f + 8, h.nranks);
    put32(f + 12, h.rank);
    put32(f + 16, h.chunk_bytes);
    put32(f + 20, h.slots);
    put64(f + 24, h.result_addr);
    put32(f + 32, h.result_rkey);
    ibex_ep_addr_pack(&h.ep, f + kHelloEp, IBEX_EP_ADDR_WIRE_LEN);
    put_text(f + kHelloJob, kJobBytes, h.job);
    put_text(f + kHelloDevice, kDeviceBytes, h.device);
}

bool decode_hello(const uint8_t *f, Hello *h, std::string *why) {
    Kind kind{};
    if (!get_head(f, &kind, why)) return false;
    if (kind != Kind::hello) {
        *why = "expected a hello frame";
        return false;
    }
    h->nranks = get32(f + 8);
    h->rank = get32(f + 12);
    h->chunk_bytes = get32(f + 16);
    h->slots = get32(f + 20);
    h->result_addr = get64(f + 24);
    h->result_rkey = get32(f + 32);
    h->job = get_text(f + kHelloJob, kJobBytes);
    h->device = get_text(f + kHelloDevice, kDeviceBytes);
    if (ibex_ep_addr_unpack(f + kHelloEp, IBEX_EP_ADDR_WIRE_LEN, &h->ep) != IBEX_OK) {
        *why = "malformed QP address";
        return false;
    }
    if (h->nranks == 0 || h->rank >= h->nranks || h->nranks > (1u << 20)) {
        *why = "rank " + std::to_string(h->rank) + " of " + std::to_string(h->nranks) + " is not a rank of a world";
        return false;
    }
    if (h->chunk_bytes < 64 || h->chunk_bytes > (1u << 30) || h->chunk_bytes % 8 != 0 || h->slots == 0 ||
        h->slots > kMaxSlots) {
        *why = "slot geometry " + std::to_string(h->slots) + " x " + std::to_string(h->chunk_bytes) +
               " bytes is out of range (1.." + std::to_string(kMaxSlots) + " slots of 64 B..1 GiB, a multiple of 8)";
        return false;
    }
    if (h->job.empty()) {
        *why = "empty job key";
        return false;
    }
    return true;
}

void encode_reply(const Reply &r, uint8_t *f) {
    put_head(f, r.kind);
    put64(f + 8, r.push_addr);
    put32(f + 16, r.push_rkey);
    ibex_ep_addr_pack(&r.ep, f + kReplyEp, IBEX_EP_ADDR_WIRE_LEN);
    put_text(f + kReplyText, kTextBytes, r.text);
}

bool decode_reply(const uint8_t *f, Reply *r, std::string *why) {
    if (!get_head(f, &r->kind, why)) return false;
    if (r->kind != Kind::welcome && r->kind != Kind::refused && r->kind != Kind::failed) {
        *why = "unexpected frame kind " + std::to_string(static_cast<unsigned>(r->kind));
        return false;
    }
    r->push_addr = get64(f + 8);
    r->push_rkey = get32(f + 16);
    r->text = get_text(f + kReplyText, kTextBytes);
    if (r->kind == Kind::welcome && ibex_ep_addr_unpack(f + kReplyEp, IBEX_EP_ADDR_WIRE_LEN, &r->ep) != IBEX_OK) {
        *why = "malformed QP address";
        return false;
    }
    return true;
}

ibex_status_t post_slot_write(ibex_qp_t *qp, uint64_t wr_id, const void *addr, uint32_t bytes, uint32_t lkey,
                              uint64_t remote_addr, uint32_t rkey, uint32_t imm) {
    ibex_sge_t sge{reinterpret_cast<uintptr_t>(addr), bytes, lkey};
    ibex_send_wr_t wr{};
    wr.wr_id = wr_id;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBEX_WR_RDMA_WRITE_WITH_IMM;
    wr.send_flags = IBEX_SEND_SIGNALED;
    wr.imm_data = imm;
    wr.wr.rdma.remote_addr = remote_addr;
    wr.wr.rdma.rkey = rkey;
    return ibex_post_send(qp, &wr, nullptr);
}

ibex_status_t open_context(const std::string &device, ibex_context_t **ctx) {
    ibex_status_t st = ibex_open_device(device.c_str(), nullptr, ctx);
    if (st != IBEX_ERR_ADDRESS_IN_USE || device.rfind("udp:", 0) != 0) return st;
    constexpr uint16_t kFirst = 4792, kTries = 256;
    ibex_context_attr_t attr = IBEX_CONTEXT_ATTR_INIT;
    for (uint16_t i = 0; i < kTries && st == IBEX_ERR_ADDRESS_IN_USE; ++i) {
        attr.udp_port = static_cast<uint16_t>(kFirst + i);
        st = ibex_open_device(device.c_str(), &attr, ctx);
    }
    return st;
}

// [0] magic [4] seq [8] bytes [12] type [13] op [14] status
void put_slot_header(uint8_t *s, const SlotHeader &h) {
    put32(s, h.magic);
    put32(s + 4, h.seq);
    put32(s + 8, h.bytes);
    s[12] = h.type;
    s[13] = h.op;
    s[14] = h.status;
}

SlotHeader get_slot_header(const uint8_t *s) {
    SlotHeader h;
    h.magic = get32(s);
    h.seq = get32(s + 4);
    h.bytes = get32(s + 8);
    h.type = s[12];
    h.op = s[13];
    h.status = s[14];
    return h;
}

} // namespace ibex::coll::sumsrv
