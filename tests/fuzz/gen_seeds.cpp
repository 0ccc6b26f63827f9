// Writes the seed corpus of the receive-path fuzz target: valid RoCEv2 frames of every
// opcode ibex speaks (SEND/WRITE first/middle/last/only with and without immediate, READ
// request and responses, ACK and NAKs, atomic ACK, CMP_SWAP, FETCH_ADD, CNP), each with
// a correct ICRC for 10.0.0.2:4791 -> 10.0.0.1:4791, wrapped in the record format of
// fuzz_format.h, alone and in the sequences that drive a QP through whole messages.
//
// usage: gen_seeds DIR
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "tests/fuzz/fuzz_format.h"
#include "transport/soft/codec/icrc.h"
#include "transport/soft/codec/roce.h"

using namespace ibex::fuzz;
using namespace ibex::roce;

namespace {

using Bytes = std::vector<uint8_t>;

constexpr uint64_t kVaTag = 0x00007f0000000000ull;

Bytes frame(uint8_t op, uint32_t psn, const Bytes &ext, uint32_t payload_len, bool ack_req = false,
            uint32_t dest_qp = kPeerQpn, bool becn = false) {
    Bytes b(kBthLen);
    Bth h;
    h.opcode = op;
    h.pad_count = (op_info(op).flags & kHasPayload) ? pad_for(payload_len) : 0;
    h.dest_qp = dest_qp;
    h.ack_req = ack_req;
    h.psn = psn;
    h.becn = becn;
    encode_bth(b.data(), h);
    b.insert(b.end(), ext.begin(), ext.end());
    for (uint32_t i = 0; i < payload_len; ++i) b.push_back(static_cast<uint8_t>(i * 13 + op));
    for (uint8_t i = 0; i < h.pad_count; ++i) b.push_back(0);
    IcrcIpv4Fields f;
    f.src_ip = kPeerIp;
    f.src_port = kPort;
    f.dst_ip = kLocalIp;
    f.dst_port = kPort;
    const iovec whole{b.data(), b.size()};
    const uint32_t icrc = icrc_ipv4(f, std::span<const iovec>(&whole, 1), b.size());
    b.resize(b.size() + kIcrcLen);
    store_icrc(b.data() + b.size() - kIcrcLen, icrc);
    return b;
}

Bytes reth(uint32_t off, uint32_t dma_len, uint32_t rkey = 0x100) {
    Bytes e(kRethLen);
    encode_reth(e.data(), {kVaTag + off + kVaBias, rkey, dma_len});
    return e;
}
Bytes imm() { return {0xde, 0xad, 0xbe, 0xef}; }
Bytes cat(Bytes a, const Bytes &b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
}
Bytes aeth(uint8_t syndrome, uint32_t msn = 1) {
    Bytes e(kAethLen);
    encode_aeth(e.data(), {syndrome, msn});
    return e;
}
Bytes atomic_eth(uint32_t off, uint64_t swap_add, uint64_t compare) {
    Bytes e(kAtomicEthLen);
    encode_atomic_eth(e.data(), {kVaTag + off + kVaBias, 0x100, swap_add, compare});
    return e;
}
Bytes atomic_ack(uint64_t orig) {
    Bytes e = aeth(kAethAck | kAethCreditsUnlimited);
    Bytes o(8);
    put64(o.data(), orig);
    return cat(e, o);
}

struct Rec {
    uint8_t ctl;
    uint8_t sel;
    int8_t delta;
    Bytes pkt;
};

constexpr uint8_t kReq = kCtlPatchPsn | kCtlPatchKey; // ICRC recomputed (even ctl)
constexpr uint8_t kResp = kCtlPatchPsn;

int g_files = 0;
std::string g_dir;

void emit(const std::string &name, const std::vector<Rec> &recs) {
    Bytes out;
    for (const Rec &r : recs) {
        out.push_back(r.ctl);
        out.push_back(r.sel);
        out.push_back(static_cast<uint8_t>(r.delta));
        out.push_back(static_cast<uint8_t>(r.pkt.size() >> 8));
        out.push_back(static_cast<uint8_t>(r.pkt.size()));
        out.insert(out.end(), r.pkt.begin(), r.pkt.end());
    }
    const std::string path = g_dir + "/" + name;
    FILE *f = std::fopen(path.c_str(), "wb");
    if (!f || std::fwrite(out.data(), 1, out.size(), f) != out.size() || std::fclose(f) != 0) {
        std::perror(path.c_str());
        std::exit(1);
    }
    ++g_files;
}

} // namespace

int main(int argc, char **argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
        return 2;
    }
    g_dir = argv[1];
    const uint8_t B = kSelB, A = kSelA, C = kSelC, R = kSelRaw;
    const uint32_t p = kRqPsn; // the PSN written in the frame; the target patches it anyway

    // ---- requests, responder QP B (MTU 256)
    emit("send_only", {{kReq, B, 0, frame(kSendOnly, p, {}, 100, true)}});
    emit("send_only_imm", {{kReq, B, 0, frame(kSendOnlyImm, p, imm(), 40, true)}});
    emit("send_first_middle_last",
          {{kReq, B, 0, frame(kSendFirst, p, {}, 256)},
           {kReq, B, 0, frame(kSendMiddle, p + 1, {}, 256)},
           {kReq | kCtlPollCq, B, 0, frame(kSendLast, p + 2, {}, 10, true)}});
    emit("send_first_last_imm", {{kReq, B, 0, frame(kSendFirst, p, {}, 256)},
                                  {kReq, B, 0, frame(kSendLastImm, p + 1, imm(), 100, true)}});
    emit("send_first", {{kReq, B, 0, frame(kSendFirst, p, {}, 256)}});
    emit("send_middle", {{kReq, B, 0, frame(kSendMiddle, p, {}, 256)}});
    emit("send_last", {{kReq, B, 0, frame(kSendLast, p, {}, 10, true)}});
    emit("send_last_imm", {{kReq, B, 0, frame(kSendLastImm, p, imm(), 3, true)}});
    emit("write_only", {{kReq, B, 0, frame(kWriteOnly, p, reth(128, 50), 50, true)}});
    emit("write_only_imm", {{kReq, B, 0, frame(kWriteOnlyImm, p, cat(reth(256, 7), imm()), 7, true)}});
    emit("write_first_middle_last", {{kReq, B, 0, frame(kWriteFirst, p, reth(1000, 600), 256)},
                                      {kReq, B, 0, frame(kWriteMiddle, p + 1, {}, 256)},
                                      {kReq, B, 0, frame(kWriteLast, p + 2, {}, 88, true)}});
    emit("write_first_last_imm", {{kReq, B, 0, frame(kWriteFirst, p, reth(2000, 300), 256)},
                                   {kReq, B, 0, frame(kWriteLastImm, p + 1, imm(), 44, true)}});
    emit("write_first", {{kReq, B, 0, frame(kWriteFirst, p, reth(0, 1024), 256)}});
    emit("write_middle", {{kReq, B, 0, frame(kWriteMiddle, p, {}, 256)}});
    emit("write_last", {{kReq, B, 0, frame(kWriteLast, p, {}, 1, true)}});
    emit("write_last_imm", {{kReq, B, 0, frame(kWriteLastImm, p, imm(), 0, true)}});
    emit("write_zero_len", {{kReq, B, 0, frame(kWriteOnly, p, reth(0, 0), 0, true)}});
    emit("write_bad_rights", {{kReq | kCtlLocalMr, B, 0, frame(kWriteOnly, p, reth(64, 32), 32, true)}});
    emit("write_out_of_bounds", {{kReq, B, 0, frame(kWriteOnly, p, reth(65500, 100), 100, true)}});
    emit("write_below_region", {{kReq, B, 0, frame(kWriteOnly, p, reth(0, 16), 16, true)}, // at base
                                 {kReq, B, 0, frame(kWriteOnly, p + 1, reth(0, 16), 16, true)}});
    emit("read_request", {{kReq, B, 0, frame(kReadRequest, p, reth(1000, 700), 0, true)}});
    emit("read_request_zero", {{kReq, B, 0, frame(kReadRequest, p, reth(0, 0), 0, true)}});
    emit("read_request_replay", {{kReq, B, 0, frame(kReadRequest, p, reth(4000, 300), 0, true)},
                                  {kReq, B, -2, frame(kReadRequest, p, reth(4000, 300), 0, true)}});
    emit("compare_swap", {{kReq, B, 0, frame(kCompareSwap, p, atomic_eth(4096, 9, 0x1111111111111111ull), 0, true)}});
    emit("fetch_add", {{kReq, B, 0, frame(kFetchAdd, p, atomic_eth(4104, 5, 0), 0, true)}});
    emit("fetch_add_replay", {{kReq, B, 0, frame(kFetchAdd, p, atomic_eth(4104, 5, 0), 0, true)},
                               {kReq | kCtlPollCq, B, -1, frame(kFetchAdd, p, atomic_eth(4104, 5, 0), 0, true)}});
    emit("atomic_misaligned", {{kReq, B, 0, frame(kFetchAdd, p, atomic_eth(4100, 5, 0), 0, true)}});
    emit("psn_gap_then_retry", {{kReq, B, 3, frame(kSendOnly, p, {}, 20, true)},
                                 {kReq, B, 4, frame(kSendOnly, p, {}, 20, true)},
                                 {kReq, B, 0, frame(kSendOnly, p, {}, 20, true)}});
    emit("send_duplicate", {{kReq, B, 0, frame(kSendOnly, p, {}, 20, true)},
                             {kReq, B, -1, frame(kSendOnly, p, {}, 20, true)}});
    emit("rnr_no_receive", {{kReq | kCtlNoProgress, B, 0, frame(kSendOnly, p, {}, 8)},
                             {kReq | kCtlNoProgress, B, 0, frame(kSendOnly, p, {}, 8)},
                             {kReq | kCtlNoProgress, B, 0, frame(kSendOnly, p, {}, 8)},
                             {kReq | kCtlNoProgress, B, 0, frame(kSendOnly, p, {}, 8)},
                             {kReq, B, 0, frame(kSendOnly, p, {}, 8, true)}});
    // QP C: RTR only, MTU 4096, remote write only.
    emit("c_write_only", {{kReq, C, 0, frame(kWriteOnly, p, reth(8192, 4096), 4096, true)}});
    emit("c_read_no_right", {{kReq, C, 0, frame(kReadRequest, p, reth(0, 64), 0, true)}});
    emit("c_send_only_imm", {{kReq | kCtlCeMark, C, 0, frame(kSendOnlyImm, p, imm(), 4000, true)}});

    // ---- responses to requester QP A: SEND 2 PSNs, WRITE 1, READ 3, CMP_SWAP, FETCH_ADD, SEND_IMM
    const uint32_t q = kPsnA;
    const uint8_t ack = kAethAck | kAethCreditsUnlimited;
    emit("ack", {{kResp, A, 2, frame(kAcknowledge, q, aeth(ack), 0)}});
    emit("ack_partial", {{kResp, A, 0, frame(kAcknowledge, q, aeth(ack), 0)}});
    emit("nak_psn_seq", {{kResp, A, 1, frame(kAcknowledge, q, aeth(uint8_t(kAethNak) | kNakPsnSeqError), 0)}});
    emit("nak_psn_seq_exhaust", {{kResp, A, 0, frame(kAcknowledge, q, aeth(uint8_t(kAethNak) | kNakPsnSeqError), 0)},
                                  {kResp, A, 0, frame(kAcknowledge, q, aeth(uint8_t(kAethNak) | kNakPsnSeqError), 0)},
                                  {kResp, A, 0, frame(kAcknowledge, q, aeth(uint8_t(kAethNak) | kNakPsnSeqError), 0)},
                                  {kResp | kCtlPollCq, A, 0, frame(kAcknowledge, q, aeth(uint8_t(kAethNak) | kNakPsnSeqError), 0)}});
    emit("rnr_nak", {{kResp, A, 0, frame(kAcknowledge, q, aeth(kAethRnrNak | 1), 0)}});
    emit("nak_remote_access", {{kResp | kCtlPollCq, A, 0, frame(kAcknowledge, q, aeth(uint8_t(kAethNak) | kNakRemoteAccess), 0)}});
    emit("nak_invalid_request", {{kResp, A, 2, frame(kAcknowledge, q, aeth(uint8_t(kAethNak) | kNakInvalidRequest), 0)}});
    emit("nak_remote_op", {{kResp, A, 0, frame(kAcknowledge, q, aeth(uint8_t(kAethNak) | kNakRemoteOperational), 0)}});
    emit("read_response_only", {{kResp, A, 0, frame(kReadResponseOnly, q, aeth(ack), 16)}});
    emit("read_response_first", {{kResp, A, 2, frame(kAcknowledge, q, aeth(ack), 0)},
                                  {kResp, A, 0, frame(kReadResponseFirst, q, aeth(ack), 1024)}});
    emit("read_response_middle", {{kResp, A, 0, frame(kReadResponseMiddle, q, {}, 1024)}});
    emit("read_response_last", {{kResp, A, 0, frame(kReadResponseLast, q, aeth(ack), 452)}});
    emit("atomic_ack", {{kResp, A, 0, frame(kAtomicAcknowledge, q, atomic_ack(42), 0)}});
    emit("requester_full_sequence",
          {{kResp, A, 2, frame(kAcknowledge, q, aeth(ack), 0)},
           {kResp, A, 0, frame(kReadResponseFirst, q, aeth(ack), 1024)},
           {kResp, A, 0, frame(kReadResponseMiddle, q, {}, 1024)},
           {kResp, A, 0, frame(kReadResponseLast, q, aeth(ack), kAReadLen - 2048)},
           {kResp, A, 0, frame(kAtomicAcknowledge, q, atomic_ack(5), 0)},
           {kResp, A, 0, frame(kAtomicAcknowledge, q, atomic_ack(7), 0)},
           {kResp | kCtlPollCq, A, 0, frame(kAcknowledge, q, aeth(ack), 0)}});
    emit("requester_read_lost_middle", {{kResp, A, 2, frame(kAcknowledge, q, aeth(ack), 0)},
                                         {kResp, A, 0, frame(kReadResponseFirst, q, aeth(ack), 1024)},
                                         {kResp, A, 1, frame(kReadResponseLast, q, aeth(ack), 452)}});
    emit("requester_ack_covers_read", {{kResp, A, 6, frame(kAcknowledge, q, aeth(ack), 0)}});

    // ---- raw frames (ICRC as generated): CNP, unknown QP, and a broken ICRC
    emit("cnp", {{kCtlRaw, R, 0, frame(kCnp, 0, Bytes(kCnpPayloadLen, 0), 0, false, kPeerQpn, true)}});
    emit("unknown_qp", {{kCtlRaw, R, 0, frame(kSendOnly, p, {}, 12, true, 0x123456)}});
    emit("bad_icrc", {{kCtlRaw | kCtlPatchPsn, B, 0, frame(kSendOnly, p, {}, 12, true)}});
    emit("wrong_source", {{kReq | kCtlWrongSrc, B, 0, frame(kSendOnly, p, {}, 12, true)}});
    std::printf("gen_seeds: wrote %d seed files to %s\n", g_files, g_dir.c_str());
    return 0;
}
