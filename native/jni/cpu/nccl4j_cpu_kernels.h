/*
 * Reduction kernels of the CPU backend's shared-memory algorithms, used through the JavaCPP class
 * io.nccl4j.internal.bind.cpu.CpuKernels. One pass: every element is read from every source, combined in
 * source order ((x0 op x1) op x2 ...), and the result is stored to every destination, so the
 * memory sees each input byte read once and each output byte written once; Java 17 cannot express
 * that loop vectorised over native memory (see docs/ALGORITHMS.md).
 *
 * Bit-exact with the Java reducers: the same IEEE operations in the same order (no FMA, no
 * fast-math, no flush-to-zero), two's-complement wrapping for integer SUM/PROD (done in unsigned
 * types, where wrapping is defined), signed comparison for MIN/MAX. A destination may be one of the
 * sources (in place): within each block all loads come before any store, and blocks move forward.
 *
 * Streaming stores. A call's single destination that overlaps none of the sources and holds at
 * least NCCL4J_STREAM_MIN_BYTES is written with non-temporal stores (SSE2 movntdq), as is a copy of
 * that size: such a store goes to memory without first reading the line into the cache (the read
 * for ownership a normal store makes) and leaves the sources' lines where they are. An output that
 * large is not read again from cache anyway; docs/PERFORMANCE.md (section 1) measured a cold
 * out-of-place reduction of two sources 1.3x and a copy 1.6x faster that way, and smaller outputs,
 * which the next reader may still find in cache, faster stored normally.
 * A caller that writes a large output piece by piece, each piece to at most two places, may ask for
 * streaming whatever the piece's size (NCCL4J_STREAM_PIECES).
 * In place (a destination that is a source) the line is in cache already and normal stores are
 * kept. Streaming stores are weakly ordered: a kernel that used them ends with a store fence, so
 * anything its caller stores afterwards (the flag that tells another rank or process the data is
 * there) becomes visible after the data (docs/ALGORITHMS.md, "Memory ordering between processes").
 */
#ifndef NCCL4J_CPU_KERNELS_H
#define NCCL4J_CPU_KERNELS_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#define NCCL4J_CAN_STREAM 1
/* Stores the array v (a multiple of 16 bytes) at o (16-byte aligned) with streaming stores. */
#define NCCL4J_STREAM(o, v)                                                                     \
    for (size_t b_ = 0; b_ < sizeof(v); b_ += 16) {                                             \
        __m128i x_;                                                                             \
        memcpy(&x_, (const char*) (v) + b_, 16);                                                \
        _mm_stream_si128((__m128i*) ((char*) (o) + b_), x_);                                     \
    }
#define NCCL4J_FENCE() _mm_sfence()
#else
#define NCCL4J_CAN_STREAM 0
#define NCCL4J_STREAM(o, v) memcpy((o), (v), sizeof(v))
#define NCCL4J_FENCE() ((void) 0)
#endif

/* The least bytes per destination (or copy) written with streaming stores. */
#define NCCL4J_STREAM_MIN_BYTES ((size_t) 4 << 20)

/* The numbers io.nccl4j.cpu.Reduction.ArrayOp gives each kernel (its kernelCode): change both together. */
enum {
    NCCL4J_F32_SUM, NCCL4J_F32_PROD, NCCL4J_F64_SUM, NCCL4J_F64_PROD,
    NCCL4J_I32_SUM, NCCL4J_I32_PROD, NCCL4J_I32_MIN, NCCL4J_I32_MAX,
    NCCL4J_I64_SUM, NCCL4J_I64_PROD, NCCL4J_I64_MIN, NCCL4J_I64_MAX,
    NCCL4J_OP_COUNT
};

/* Elements per block: 64 bytes of 32-bit or 128 bytes of 64-bit values, held in registers. */
#define NCCL4J_BLOCK 16

/* Flags of nccl4j_reduce. */
/* A single destination of at least NCCL4J_STREAM_MIN_BYTES that overlaps no source: streaming stores. */
#define NCCL4J_STREAM_LARGE 1
/*
 * Also up to NCCL4J_STREAM_PIECE_OUTPUTS destinations of any size that overlap no source: the caller
 * writes one piece of outputs that are large as a whole and not read again soon (the hierarchical
 * AllReduce's pieces received from another host, docs/PERFORMANCE.md section 3c).
 */
#define NCCL4J_STREAM_PIECES 2
#define NCCL4J_STREAM_PIECE_OUTPUTS 2

/* No streaming: every destination stored normally. */
#define NCCL4J_NO_STREAM ((size_t) -1)

/*
 * head is NCCL4J_NO_STREAM, or how many leading elements are stored normally so that every
 * destination's blocks after them are 16-byte aligned and stored streaming.
 */
#define NCCL4J_DEFINE_REDUCE(NAME, ATTR, T, EXPR)                                                  \
    ATTR static void NAME(const void* const* src, int ns, void* const* dst, int nd, size_t n, size_t head) { \
        size_t i = 0;                                                                               \
        const int stream = head != NCCL4J_NO_STREAM;                                                \
        for (; stream && i < head && i < n; i++) {                                                  \
            T v = ((const T*) src[0])[i];                                                           \
            for (int k = 1; k < ns; k++) { T a = v, b = ((const T*) src[k])[i]; v = (EXPR); }       \
            for (int d = 0; d < nd; d++) ((T*) dst[d])[i] = v;                                      \
        }                                                                                           \
        for (; i + NCCL4J_BLOCK <= n; i += NCCL4J_BLOCK) {                                          \
            T v[NCCL4J_BLOCK];                                                                      \
            const T* s0 = (const T*) src[0] + i;                                                    \
            for (int j = 0; j < NCCL4J_BLOCK; j++) v[j] = s0[j];                                    \
            for (int k = 1; k < ns; k++) {                                                          \
                const T* s = (const T*) src[k] + i;                                                 \
                for (int j = 0; j < NCCL4J_BLOCK; j++) { T a = v[j], b = s[j]; v[j] = (EXPR); }     \
            }                                                                                       \
            if (stream) {                                                                           \
                for (int d = 0; d < nd; d++) { NCCL4J_STREAM((T*) dst[d] + i, v) }                 \
            } else {                                                                                \
                for (int d = 0; d < nd; d++) {                                                      \
                    T* o = (T*) dst[d] + i;                                                         \
                    for (int j = 0; j < NCCL4J_BLOCK; j++) o[j] = v[j];                             \
                }                                                                                   \
            }                                                                                       \
        }                                                                                           \
        for (; i < n; i++) {                                                                        \
            T v = ((const T*) src[0])[i];                                                           \
            for (int k = 1; k < ns; k++) { T a = v, b = ((const T*) src[k])[i]; v = (EXPR); }       \
            for (int d = 0; d < nd; d++) ((T*) dst[d])[i] = v;                                      \
        }                                                                                           \
        if (stream) NCCL4J_FENCE();                                                                 \
    }

#define NCCL4J_DEFINE_ALL(SUFFIX, ATTR)                                                          \
    NCCL4J_DEFINE_REDUCE(f32_sum_##SUFFIX, ATTR, float, a + b)                                  \
    NCCL4J_DEFINE_REDUCE(f32_prod_##SUFFIX, ATTR, float, a * b)                                 \
    NCCL4J_DEFINE_REDUCE(f64_sum_##SUFFIX, ATTR, double, a + b)                                 \
    NCCL4J_DEFINE_REDUCE(f64_prod_##SUFFIX, ATTR, double, a * b)                                \
    NCCL4J_DEFINE_REDUCE(u32_sum_##SUFFIX, ATTR, uint32_t, a + b)                               \
    NCCL4J_DEFINE_REDUCE(u32_prod_##SUFFIX, ATTR, uint32_t, a * b)                              \
    NCCL4J_DEFINE_REDUCE(i32_min_##SUFFIX, ATTR, int32_t, a < b ? a : b)                        \
    NCCL4J_DEFINE_REDUCE(i32_max_##SUFFIX, ATTR, int32_t, a > b ? a : b)                        \
    NCCL4J_DEFINE_REDUCE(u64_sum_##SUFFIX, ATTR, uint64_t, a + b)                               \
    NCCL4J_DEFINE_REDUCE(u64_prod_##SUFFIX, ATTR, uint64_t, a * b)                              \
    NCCL4J_DEFINE_REDUCE(i64_min_##SUFFIX, ATTR, int64_t, a < b ? a : b)                        \
    NCCL4J_DEFINE_REDUCE(i64_max_##SUFFIX, ATTR, int64_t, a > b ? a : b)                        \
    static void (*const nccl4j_kernels_##SUFFIX[NCCL4J_OP_COUNT])(const void* const*, int,      \
                                                                   void* const*, int, size_t, size_t) = { \
        f32_sum_##SUFFIX, f32_prod_##SUFFIX, f64_sum_##SUFFIX, f64_prod_##SUFFIX,               \
        u32_sum_##SUFFIX, u32_prod_##SUFFIX, i32_min_##SUFFIX, i32_max_##SUFFIX,                \
        u64_sum_##SUFFIX, u64_prod_##SUFFIX, i64_min_##SUFFIX, i64_max_##SUFFIX};

/* Baseline x86-64 (SSE2) and AVX2, chosen once at run time by what the CPU supports. */
NCCL4J_DEFINE_ALL(base, )
#if defined(__x86_64__) && defined(__GNUC__)
NCCL4J_DEFINE_ALL(avx2, __attribute__((target("avx2"))))
#define NCCL4J_HAS_AVX2() (__builtin_cpu_init(), __builtin_cpu_supports("avx2"))
#else
#define nccl4j_kernels_avx2 nccl4j_kernels_base
#define NCCL4J_HAS_AVX2() 0
#endif

/* The instruction set the kernels use on this CPU: "avx2" or "baseline". */
static inline const char* nccl4j_cpu_kernels_isa(void) {
    return NCCL4J_HAS_AVX2() ? "avx2" : "baseline";
}

/* The least bytes per destination written with streaming stores (for tests and reports). */
static inline long nccl4j_stream_min_bytes(void) {
    return NCCL4J_CAN_STREAM ? (long) NCCL4J_STREAM_MIN_BYTES : -1;
}

/* Whether [a, a + an) and [b, b + bn) share a byte. */
static inline int nccl4j_overlap(const void* a, size_t an, const void* b, size_t bn) {
    uintptr_t x = (uintptr_t) a, y = (uintptr_t) b;
    return x < y + bn && y < x + an;
}

/*
 * NCCL4J_NO_STREAM, or how many leading elements of es bytes to store normally before the
 * destinations are 16-byte aligned: under NCCL4J_STREAM_LARGE one destination, large enough; under
 * NCCL4J_STREAM_PIECES up to two of any size; none overlapping a source, all with the same skew.
 * More destinations at once are stored normally: with four ranks' outputs streamed by each of four
 * threads on two cores, AllReduce took up to twice as long as with normal stores (docs/PERFORMANCE.md,
 * section 1) -- more streams at once than a core combines writes for. Two, in the hierarchical
 * AllReduce's pieces, measured faster than normal stores (section 3c).
 */
static inline size_t nccl4j_stream_head(const void* const* src, int ns, void* const* dst, int nd, size_t n,
                                        size_t es, int flags) {
    size_t bytes = n * es;
    int large = (flags & NCCL4J_STREAM_LARGE) && nd == 1 && bytes >= NCCL4J_STREAM_MIN_BYTES;
    int piece = (flags & NCCL4J_STREAM_PIECES) && nd >= 1 && nd <= NCCL4J_STREAM_PIECE_OUTPUTS && n > 0;
    if (!NCCL4J_CAN_STREAM || !(large || piece)) {
        return NCCL4J_NO_STREAM;
    }
    uintptr_t skew = (uintptr_t) dst[0] % 16;
    if (skew % es != 0) {
        return NCCL4J_NO_STREAM;
    }
    for (int d = 0; d < nd; d++) {
        if ((uintptr_t) dst[d] % 16 != skew) {
            return NCCL4J_NO_STREAM;
        }
        for (int k = 0; k < ns; k++) {
            if (nccl4j_overlap(dst[d], bytes, src[k], bytes)) {
                return NCCL4J_NO_STREAM;
            }
        }
    }
    return ((16 - skew) % 16) / es;
}

/*
 * dst[d][i] = src[0][i] op src[1][i] op ... op src[ns-1][i] for every d < nd and i < n, where
 * sources and destinations are tables of addresses; flags 0 stores every destination normally,
 * NCCL4J_STREAM_LARGE and NCCL4J_STREAM_PIECES say when to stream. Returns 1 when the destinations were written with
 * streaming stores, 0 when normally, or -1 for an unknown op or counts out of range (nothing is
 * touched then).
 */
static inline int nccl4j_reduce(int op, const void* const* src, int ns, void* const* dst, int nd, size_t n,
                                int flags) {
    static const size_t sizes[NCCL4J_OP_COUNT] = {4, 4, 8, 8, 4, 4, 4, 4, 8, 8, 8, 8};
    if (op < 0 || op >= NCCL4J_OP_COUNT || ns < 1 || nd < 0) {
        return -1;
    }
    static const bool avx2 = NCCL4J_HAS_AVX2();
    size_t head = flags & (NCCL4J_STREAM_LARGE | NCCL4J_STREAM_PIECES)
        ? nccl4j_stream_head(src, ns, dst, nd, n, sizes[op], flags) : NCCL4J_NO_STREAM;
    (avx2 ? nccl4j_kernels_avx2 : nccl4j_kernels_base)[op](src, ns, dst, nd, n, head);
    return head == NCCL4J_NO_STREAM ? 0 : 1;
}

/*
 * Copies bytes from src to dst: with streaming stores when stream is not 0, there are at least
 * NCCL4J_STREAM_MIN_BYTES and the two do not overlap (returns 1), else as memmove (returns 0).
 */
static inline int nccl4j_copy(void* dst, const void* src, size_t bytes, int stream) {
#if NCCL4J_CAN_STREAM
    if (stream && bytes >= NCCL4J_STREAM_MIN_BYTES && !nccl4j_overlap(dst, bytes, src, bytes)) {
        size_t head = (16 - (uintptr_t) dst % 16) % 16;
        memcpy(dst, src, head);
        char* d = (char*) dst + head;
        const char* s = (const char*) src + head;
        size_t left = bytes - head;
        for (; left >= 64; left -= 64, d += 64, s += 64) {
            __m128i a = _mm_loadu_si128((const __m128i*) s);
            __m128i b = _mm_loadu_si128((const __m128i*) (s + 16));
            __m128i c = _mm_loadu_si128((const __m128i*) (s + 32));
            __m128i e = _mm_loadu_si128((const __m128i*) (s + 48));
            _mm_stream_si128((__m128i*) d, a);
            _mm_stream_si128((__m128i*) (d + 16), b);
            _mm_stream_si128((__m128i*) (d + 32), c);
            _mm_stream_si128((__m128i*) (d + 48), e);
        }
        memcpy(d, s, left);
        _mm_sfence();
        return 1;
    }
#endif
    memmove(dst, src, bytes);
    return 0;
}

#endif
