// CRC-32 (zlib/Ethernet polynomial, reflected) folded 256 bits at a time with VPCLMULQDQ
// on AVX2 registers. ISA-L's x86 kernels fold 128 bits per carry-less multiply unless the
// CPU has AVX-512; on AVX2 CPUs that have VPCLMULQDQ (AMD Zen 3/4, Intel Alder Lake and
// later) this does twice the bytes per multiply, and the ICRC runs over every payload
// byte on both sides of the soft engine.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ibex::roce {

// True if this CPU (and OS) runs crc32_wide's vector path.
bool crc32_wide_available();

// CRC-32 of [data, data + len) continuing from `crc` (0 to start), the same value as zlib's
// crc32(). Only for CPUs where crc32_wide_available(); any length.
uint32_t crc32_wide(uint32_t crc, const void *data, size_t len);

} // namespace ibex::roce
