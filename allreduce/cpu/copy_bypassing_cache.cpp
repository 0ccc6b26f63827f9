#include "allreduce/cpu/copy_bypassing_cache.h"

#include <atomic>
#include <cstdint>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace ibex::coll {

void copy_bypassing_cache(void *dst_v, const void *src_v, size_t bytes) {
#if defined(__x86_64__)
    auto *dst = static_cast<uint8_t *>(dst_v);
    const auto *src = static_cast<const uint8_t *>(src_v);
    if (bytes >= 256) { // below that the fence costs more than the cache it saves
        // SSE2: every x86-64 has it. Stores must be 16-byte aligned; loads need not be.
        const size_t head = (16 - (reinterpret_cast<uintptr_t>(dst) & 15)) & 15;
        std::memcpy(dst, src, head);
        dst += head;
        src += head;
        bytes -= head;
        const size_t body = bytes & ~size_t(63);
        for (size_t i = 0; i < body; i += 64) {
            const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i *>(src + i));
            const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i *>(src + i + 16));
            const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i *>(src + i + 32));
            const __m128i d = _mm_loadu_si128(reinterpret_cast<const __m128i *>(src + i + 48));
            _mm_stream_si128(reinterpret_cast<__m128i *>(dst + i), a);
            _mm_stream_si128(reinterpret_cast<__m128i *>(dst + i + 16), b);
            _mm_stream_si128(reinterpret_cast<__m128i *>(dst + i + 32), c);
            _mm_stream_si128(reinterpret_cast<__m128i *>(dst + i + 48), d);
        }
        std::memcpy(dst + body, src + body, bytes - body);
        _mm_sfence(); // non-temporal stores are weakly ordered
        return;
    }
#endif
    std::memcpy(dst_v, src_v, bytes);
    std::atomic_thread_fence(std::memory_order_release);
}

} // namespace ibex::coll
