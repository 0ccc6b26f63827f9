// transport/soft/tx_copy: a packet copied into one buffer carries the ICRC the engine
// would have made over its pieces, whichever way they are cut, and the pieces stay as
// they were.
#include "transport/soft/tx_copy.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "transport/soft/codec/roce.h"

namespace ibex::soft {
namespace {

struct Fixture {
    std::vector<uint8_t> bytes; // BTH + RETH + payload + the ICRC's 4 bytes (zero)
    TxPacket p;

    // The packet's bytes cut into pieces at `cuts` (offsets, increasing).
    Fixture(size_t payload, std::vector<size_t> cuts) : bytes(roce::kBthLen + 16 + payload + roce::kIcrcLen) {
        roce::Bth b;
        b.opcode = roce::kWriteFirst;
        b.dest_qp = 0x1234;
        b.psn = 77;
        roce::encode_bth(bytes.data(), b);
        for (size_t i = roce::kBthLen; i < bytes.size() - roce::kIcrcLen; ++i) bytes[i] = uint8_t(i * 31 + 5);
        p.dst = {0x0a000002u, 4791};
        p.len = static_cast<uint32_t>(bytes.size());
        p.icrc_pending = true;
        size_t at = 0;
        cuts.push_back(bytes.size());
        for (size_t c : cuts) {
            p.pieces[p.npieces++] = {bytes.data() + at, c - at};
            at = c;
        }
    }
    uint32_t engine_icrc(const roce::IcrcIpv4Fields &f) const {
        const iovec whole{const_cast<uint8_t *>(bytes.data()), bytes.size() - roce::kIcrcLen};
        return roce::icrc_ipv4(f, std::span<const iovec>(&whole, 1), whole.iov_len);
    }
};

const NetAddr kLocal{0x0a000001u, 4791};

TEST(TxCopy, CopyWithIcrcMatchesTheEngineWhereverThePiecesAreCut) {
    // Headers whole in the first piece (the engine's way), cut inside the BTH, and a
    // payload split at odd places, at sizes below and above the wide kernels' minimum.
    const std::vector<std::vector<size_t>> cut_sets = {{28}, {5}, {28, 29, 700}, {12, 28, 28, 1000}};
    for (size_t payload : {1u, 63u, 1024u, 4096u})
        for (const auto &cuts : cut_sets) {
            std::vector<size_t> inside;
            for (size_t c : cuts)
                if (c < roce::kBthLen + 16 + payload + roce::kIcrcLen) inside.push_back(c);
            Fixture fx(payload, inside);
            const std::vector<uint8_t> before = fx.bytes;
            const roce::IcrcIpv4Fields f = tx_icrc_fields(kLocal, fx.p.dst);
            std::vector<uint8_t> out(fx.p.len, 0xee);
            roce::IcrcPrefixCache cache;
            const uint32_t icrc = copy_with_icrc(out.data(), fx.p, f, cache);
            SCOPED_TRACE(testing::Message() << "payload " << payload << ", " << inside.size() << " cuts");
            EXPECT_EQ(icrc, fx.engine_icrc(f));
            EXPECT_EQ(roce::load_icrc(out.data() + out.size() - roce::kIcrcLen), icrc);
            EXPECT_EQ(0, std::memcmp(out.data(), fx.bytes.data(), out.size() - roce::kIcrcLen));
            EXPECT_EQ(fx.bytes, before) << "the engine's pieces were written";
        }
}

TEST(TxCopy, TheIcrcFollowsTheAddresses) {
    Fixture fx(256, {28});
    std::vector<uint8_t> out(fx.p.len);
    roce::IcrcPrefixCache cache;
    const uint32_t a = copy_with_icrc(out.data(), fx.p, tx_icrc_fields(kLocal, fx.p.dst), cache);
    fx.p.dst.port = 4792;
    const uint32_t b = copy_with_icrc(out.data(), fx.p, tx_icrc_fields(kLocal, fx.p.dst), cache);
    EXPECT_NE(a, b);
    EXPECT_EQ(b, fx.engine_icrc(tx_icrc_fields(kLocal, fx.p.dst)));
}

TEST(TxCopy, GatherCopiesEveryPieceInOrder) {
    Fixture fx(100, {3, 40, 41});
    std::vector<uint8_t> out(fx.p.len + 8, 0);
    EXPECT_EQ(gather_packet(out.data(), fx.p), fx.p.len);
    EXPECT_EQ(0, std::memcmp(out.data(), fx.bytes.data(), fx.p.len));
    EXPECT_EQ(out[fx.p.len], 0) << "wrote past the packet";
}

} // namespace
} // namespace ibex::soft
