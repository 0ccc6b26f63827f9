// A selective NAK (congestion/README.md, "Loss recovery") is genuine RoCEv2 to tshark: the
// frame ibex sends (BTH with the mark in its reserved bits, AETH with the hole's end in
// the MSN field, ICRC) decodes as an InfiniBand Acknowledge carrying a PSN-sequence NAK,
// with no malformed or error-level expert item. The frame is built with the codec the
// engine uses and read back from a pcap file (raw IPv4), so no capture rights are needed.
// Skips without tshark.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <unistd.h>

#include "transport/soft/codec/icrc.h"
#include "transport/soft/codec/roce.h"

using namespace ibex::roce;

namespace {

std::string run(const std::string &cmd) {
    std::string out;
    FILE *p = popen(cmd.c_str(), "r");
    if (!p) return out;
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
    pclose(p);
    return out;
}

void put_le32(std::ofstream &f, uint32_t v) { f.write(reinterpret_cast<const char *>(&v), 4); }

// IPv4 + UDP (dport 4791) + BTH + AETH + ICRC: the selective NAK for hole [psn, end).
std::vector<uint8_t> selective_nak(uint32_t psn, uint32_t end) {
    std::vector<uint8_t> f(20 + 8 + kBthLen + kAethLen + kIcrcLen, 0);
    uint8_t *ip = f.data(), *udp = ip + 20, *bth = udp + 8;
    ip[0] = 0x45;
    put16(ip + 2, static_cast<uint16_t>(f.size()));
    put16(ip + 6, 0x4000);
    ip[8] = 64;
    ip[9] = 17;
    put32(ip + 12, 0x7f000002);
    put32(ip + 16, 0x7f000003);
    uint32_t sum = 0;
    for (int i = 0; i < 20; i += 2) sum += get16(ip + i);
    while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
    put16(ip + 10, static_cast<uint16_t>(~sum));
    put16(udp, 49152);
    put16(udp + 2, 4791);
    put16(udp + 4, static_cast<uint16_t>(f.size() - 20));
    Bth b;
    b.opcode = kAcknowledge;
    b.dest_qp = 0x1234;
    b.psn = psn;
    b.resv7 = kBthSelectiveNak;
    encode_bth(bth, b);
    encode_aeth(bth + kBthLen, {uint8_t(uint8_t(kAethNak) | uint8_t(kNakPsnSeqError)), end});
    uint32_t icrc = 0;
    EXPECT_TRUE(icrc_ipv4_packet(ip, f.size() - kIcrcLen, &icrc));
    store_icrc(f.data() + f.size() - kIcrcLen, icrc);
    return f;
}

TEST(SelectiveNakOnTheWire, DecodesAsARoceV2SequenceNak) {
    if (run("command -v tshark").empty()) GTEST_SKIP() << "tshark is not installed (apt-get install tshark)";
    char dir[] = "/tmp/ibex-sack-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    const std::string pcap = std::string(dir) + "/nak.pcap";
    {
        std::ofstream f(pcap, std::ios::binary);
        put_le32(f, 0xa1b2c3d4);
        put_le32(f, 0x00040002); // version 2.4
        put_le32(f, 0);
        put_le32(f, 0);
        put_le32(f, 65535);
        put_le32(f, 228); // LINKTYPE_IPV4
        const std::vector<uint8_t> p = selective_nak(0x00fffffe, 0x000002); // the hole spans the PSN wrap
        put_le32(f, 1);
        put_le32(f, 0);
        put_le32(f, static_cast<uint32_t>(p.size()));
        put_le32(f, static_cast<uint32_t>(p.size()));
        f.write(reinterpret_cast<const char *>(p.data()), static_cast<std::streamsize>(p.size()));
    }
    const std::string out = run("timeout 60 tshark -r '" + pcap +
                                "' -T fields -E separator=, -e infiniband.bth.opcode -e infiniband.bth.psn "
                                "-e infiniband.aeth.syndrome -e infiniband.aeth.msn -e _ws.malformed "
                                "-e _ws.expert.severity 2>/dev/null");
    std::remove(pcap.c_str());
    rmdir(dir);
    // Opcode 17 (RC Acknowledge), PSN, syndrome 96 = 0x60 (NAK, PSN sequence error), the
    // MSN field, and neither a malformed mark nor an expert item.
    EXPECT_EQ(out, "17,16777214,96,2,,\n") << out;
}

} // namespace
