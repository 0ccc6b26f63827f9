#include "transport/soft/codec/roce.h"

#include <array>

namespace ibex::roce {
namespace {

constexpr uint16_t kReq = kValid | kIsRequest;
constexpr uint16_t kResp = kValid | kIsResponse;

constexpr std::array<OpInfo, 256> make_table() {
    std::array<OpInfo, 256> t{};
    for (auto &e : t) e = {0, "UNKNOWN"};
    const uint16_t send = kReq | kIsSend | kHasPayload;
    t[kSendFirst] = {uint16_t(send | kFirst), "SEND_FIRST"};
    t[kSendMiddle] = {uint16_t(send | kMiddle), "SEND_MIDDLE"};
    t[kSendLast] = {uint16_t(send | kLast), "SEND_LAST"};
    t[kSendLastImm] = {uint16_t(send | kLast | kHasImm), "SEND_LAST_WITH_IMMEDIATE"};
    t[kSendOnly] = {uint16_t(send | kFirst | kLast), "SEND_ONLY"};
    t[kSendOnlyImm] = {uint16_t(send | kFirst | kLast | kHasImm), "SEND_ONLY_WITH_IMMEDIATE"};
    const uint16_t write = kReq | kIsWrite | kHasPayload;
    t[kWriteFirst] = {uint16_t(write | kFirst | kHasReth), "RDMA_WRITE_FIRST"};
    t[kWriteMiddle] = {uint16_t(write | kMiddle), "RDMA_WRITE_MIDDLE"};
    t[kWriteLast] = {uint16_t(write | kLast), "RDMA_WRITE_LAST"};
    t[kWriteLastImm] = {uint16_t(write | kLast | kHasImm), "RDMA_WRITE_LAST_WITH_IMMEDIATE"};
    t[kWriteOnly] = {uint16_t(write | kFirst | kLast | kHasReth), "RDMA_WRITE_ONLY"};
    t[kWriteOnlyImm] = {uint16_t(write | kFirst | kLast | kHasReth | kHasImm), "RDMA_WRITE_ONLY_WITH_IMMEDIATE"};
    t[kReadRequest] = {uint16_t(kReq | kIsRead | kFirst | kLast | kHasReth), "RDMA_READ_REQUEST"};
    const uint16_t rresp = kResp | kIsRead | kHasPayload;
    t[kReadResponseFirst] = {uint16_t(rresp | kFirst | kHasAeth), "RDMA_READ_RESPONSE_FIRST"};
    t[kReadResponseMiddle] = {uint16_t(rresp | kMiddle), "RDMA_READ_RESPONSE_MIDDLE"};
    t[kReadResponseLast] = {uint16_t(rresp | kLast | kHasAeth), "RDMA_READ_RESPONSE_LAST"};
    t[kReadResponseOnly] = {uint16_t(rresp | kFirst | kLast | kHasAeth), "RDMA_READ_RESPONSE_ONLY"};
    t[kAcknowledge] = {uint16_t(kResp | kFirst | kLast | kHasAeth), "ACKNOWLEDGE"};
    t[kAtomicAcknowledge] = {uint16_t(kResp | kIsAtomic | kFirst | kLast | kHasAeth | kHasAtomicAckEth),
                             "ATOMIC_ACKNOWLEDGE"};
    t[kCompareSwap] = {uint16_t(kReq | kIsAtomic | kFirst | kLast | kHasAtomicEth), "COMPARE_SWAP"};
    t[kFetchAdd] = {uint16_t(kReq | kIsAtomic | kFirst | kLast | kHasAtomicEth), "FETCH_ADD"};
    t[kCnp] = {uint16_t(kValid), "CNP"};
    return t;
}

constexpr std::array<OpInfo, 256> kOpTable = make_table();

constexpr uint32_t kRnrTimerUs[32] = {655360, 10,    20,    30,    40,     60,     80,     120,
                                      160,    240,   320,   480,   640,    960,    1280,   1920,
                                      2560,   3840,  5120,  7680,  10240,  15360,  20480,  30720,
                                      40960,  61440, 81920, 122880, 163840, 245760, 327680, 491520};

} // namespace

const OpInfo &op_info(uint8_t opcode) { return kOpTable[opcode]; }

uint32_t rnr_timer_us(uint8_t code) { return kRnrTimerUs[code & 31]; }

uint8_t mtu_enum_for_netdev(int netdev_mtu) {
    int room = netdev_mtu - 80;
    for (uint8_t e = 5; e >= 1; --e)
        if (mtu_bytes(e) <= room) return e;
    return 0;
}

} // namespace ibex::roce
