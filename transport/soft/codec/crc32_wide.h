// CRC-32 (zlib/Ethernet polynomial, reflected) folded 256 or 512 bits at a time with
// VPCLMULQDQ, and the same fused with a copy. The ICRC runs over every payload byte on
// both sides of the soft engine, and every payload byte is copied there anyway (into the
// frame on send, out of it into a memory region on receive): computing the CRC from the
// registers the copy loads reads each byte once instead of twice.
//
// Widths: 512 on CPUs with AVX-512F and VPCLMULQDQ (Intel Ice Lake and later servers, AMD
// Zen 4), where it is about twice the speed of 256-bit folding on Zen 4 (which runs
// VPCLMULQDQ at one per two cycles at either width); 256 on AVX2 CPUs with VPCLMULQDQ
// (Zen 3, Alder Lake clients); else ISA-L's kernel (and memcpy for the copy).
#pragma once

#include <cstddef>
#include <cstdint>

namespace ibex::roce {

// The widest folding this CPU (and OS) runs: 512, 256, or 0 (none: ISA-L is used).
unsigned crc32_wide_bits();

// True if this CPU runs crc32_wide's vector path (crc32_wide_bits() != 0).
inline bool crc32_wide_available() { return crc32_wide_bits() != 0; }

// CRC-32 of [data, data + len) continuing from `crc` (0 to start), the same value as zlib's
// crc32(). Only for CPUs where crc32_wide_available(); any length.
uint32_t crc32_wide(uint32_t crc, const void *data, size_t len);

// Copies [src, src + len) to dst (the ranges must not overlap) and returns the CRC-32 of
// the bytes, continuing from `crc`: memcpy and crc32() in one pass. Any CPU, any length.
uint32_t crc32_copy(uint32_t crc, void *dst, const void *src, size_t len);

// The same at a given folding width (tests compare the widths): `bits` is 512, 256 or 0
// (ISA-L, plus memcpy for the copy) and must not exceed crc32_wide_bits().
uint32_t crc32_wide_at(unsigned bits, uint32_t crc, const void *data, size_t len);
uint32_t crc32_copy_at(unsigned bits, uint32_t crc, void *dst, const void *src, size_t len);

} // namespace ibex::roce
