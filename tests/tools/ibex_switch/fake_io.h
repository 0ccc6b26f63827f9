// In-memory frame-I/O ports for driving ibex_switch in-process (its tests, and the
// simulator's same-decisions test): frames offered to a port wait in `rx` until the
// switch receives them; what it sends is kept in `sent`, stamped with `*clock` if set.
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include <ibex/ibex.h>

#include "transport/soft/codec/icrc.h"
#include "transport/soft/codec/roce.h"
#include "transport/soft/port.h"

namespace ibex::sw::test {

using ibex::soft::NetAddr;
using ibex::soft::RxPacket;
using ibex::soft::TxPacket;

struct Sent {
    std::vector<uint8_t> data;
    NetAddr to;
    uint8_t tos;
    uint64_t t = 0; // *FakeIo::clock when sent
};

class FakeIo : public ibex::soft::Port {
public:
    explicit FakeIo(NetAddr a) : addr(a) {}
    NetAddr local() const override { return addr; }
    uint8_t max_mtu() const override { return IBEX_MTU_4096; }
    int wait_fd() const override { return -1; }
    int recv(std::span<RxPacket> out) override {
        ++recv_calls;
        int n = 0;
        held.clear();
        while (n < int(out.size()) && !rx.empty()) {
            held.push_back(std::move(rx.front()));
            rx.pop_front();
            ++n;
        }
        for (int i = 0; i < n; ++i) {
            const Sent &h = held[size_t(i)];
            RxPacket &p = out[size_t(i)];
            p = RxPacket{};
            p.data = h.data.data();
            p.len = uint32_t(h.data.size());
            p.src = h.to;
            p.dst = addr;
            p.tos = h.tos;
        }
        return n;
    }
    void send(std::span<const TxPacket> pkts) override {
        for (const TxPacket &p : pkts) {
            std::vector<uint8_t> bytes;
            for (int i = 0; i < p.npieces; ++i) {
                const auto *b = static_cast<const uint8_t *>(p.pieces[i].iov_base);
                bytes.insert(bytes.end(), b, b + p.pieces[i].iov_len);
            }
            sent.push_back({std::move(bytes), p.dst, p.tos, clock ? *clock : 0});
        }
    }
    void arrive(std::vector<uint8_t> pkt, NetAddr from, uint8_t tos) { rx.push_back({std::move(pkt), from, tos, 0}); }

    NetAddr addr;
    std::deque<Sent> rx; // `to` holds the source here
    std::vector<Sent> held;
    std::vector<Sent> sent;
    int recv_calls = 0;
    const uint64_t *clock = nullptr;
};

inline uint32_t icrc(const std::vector<uint8_t> &p, NetAddr src, NetAddr dst) {
    roce::IcrcIpv4Fields f;
    f.src_ip = src.ip;
    f.src_port = src.port;
    f.dst_ip = dst.ip;
    f.dst_port = dst.port;
    const iovec v{const_cast<uint8_t *>(p.data()), p.size() - 4};
    return roce::icrc_ipv4(f, std::span<const iovec>(&v, 1), p.size() - 4);
}

// A WRITE-only packet of `payload` bytes from `src` to switch address `dst`.
inline std::vector<uint8_t> packet(size_t payload, NetAddr src, NetAddr dst, uint8_t fill = 0x11) {
    std::vector<uint8_t> p(roce::kBthLen + roce::kRethLen + payload + 4, fill);
    roce::Bth b;
    b.opcode = roce::kWriteOnly;
    b.dest_qp = 0x123;
    b.psn = 7;
    roce::encode_bth(p.data(), b);
    roce::encode_reth(p.data() + roce::kBthLen, {0x1000, 0x55, uint32_t(payload)});
    roce::store_icrc(p.data() + p.size() - 4, icrc(p, src, dst));
    return p;
}

} // namespace ibex::sw::test
