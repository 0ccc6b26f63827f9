#include "transport/soft/codec/icrc_ip_id.h"

namespace ibex::roce {
namespace {

// CRC-32 arithmetic in the reflected representation zlib uses: bit 31 holds the
// coefficient of x^0, bit 0 that of x^31.
constexpr uint32_t kPoly = 0xedb88320u;
constexpr uint32_t kOne = 0x80000000u; // x^0

// a * b mod P.
uint32_t mul_mod(uint32_t a, uint32_t b) {
    uint32_t product = 0;
    for (uint32_t bit = kOne; bit; bit >>= 1) {
        if (a & bit) product ^= b;
        b = (b & 1) ? (b >> 1) ^ kPoly : b >> 1; // b *= x
    }
    return product;
}

// x^(2^k) mod P for k = 0..63.
struct PowersOfX {
    uint32_t v[64];
    PowersOfX() {
        v[0] = kOne >> 1; // x^1
        for (int k = 1; k < 64; ++k) v[k] = mul_mod(v[k - 1], v[k - 1]);
    }
};

// x^n mod P: what n zero bits do to the CRC register.
uint32_t x_pow(uint64_t n) {
    static const PowersOfX powers;
    uint32_t r = kOne;
    for (int k = 0; n; ++k, n >>= 1)
        if (n & 1) r = mul_mod(r, powers.v[k]);
    return r;
}

// The CRC register after the two ID bytes (big-endian, as on the wire) from a zero register.
uint32_t register_after_id(uint16_t id) {
    uint32_t r = 0;
    const uint8_t bytes[2] = {uint8_t(id >> 8), uint8_t(id)};
    for (uint8_t b : bytes) {
        r ^= b;
        for (int i = 0; i < 8; ++i) r = (r & 1) ? (r >> 1) ^ kPoly : r >> 1;
    }
    return r;
}

// Bytes the ICRC covers after the ID: the rest of the IPv4 header (14), the UDP header
// (8) and the transport bytes.
constexpr size_t kAfterIdInHeaders = 14 + 8;

} // namespace

void IcrcIpIdShift::prepare(size_t transport_len) {
    if (transport_len == len_) return;
    len_ = transport_len;
    shift_ = x_pow(8 * uint64_t(kAfterIdInHeaders + transport_len));
    for (int i = 0; i < 16; ++i) basis_[i] = mul_mod(register_after_id(uint16_t(1u << i)), shift_);
}

uint32_t IcrcIpIdShift::delta(uint16_t id_xor, size_t transport_len) {
    prepare(transport_len);
    uint32_t d = 0;
    for (int i = 0; id_xor; ++i, id_xor >>= 1)
        if (id_xor & 1) d ^= basis_[i];
    return d;
}

uint16_t IcrcIpIdShift::find(uint32_t diff, size_t transport_len, unsigned limit) {
    if (!diff) return 0;
    prepare(transport_len);
    if (limit > 4096) limit = 4096;
    unsigned span = 1;
    while (span < limit) span <<= 1;
    // Walk every ID below `span` in Gray-code order: each step flips one bit, one XOR.
    uint32_t d = 0;
    for (unsigned n = 1; n < span; ++n) {
        const unsigned bit = static_cast<unsigned>(__builtin_ctz(n));
        d ^= basis_[bit];
        const unsigned gray = n ^ (n >> 1);
        if (gray < limit && d == diff) return static_cast<uint16_t>(gray);
    }
    return 0;
}

} // namespace ibex::roce
