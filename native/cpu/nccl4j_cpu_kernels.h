/*
 * Reduction kernels of the CPU backend's shared-memory algorithms, used through the JavaCPP class
 * io.nccl4j.cpu.bind.CpuKernels. One pass: every element is read from every source, combined in
 * source order ((x0 op x1) op x2 ...), and the result is stored to every destination, so the
 * memory sees each input byte read once and each output byte written once; Java 17 cannot express
 * that loop vectorised over native memory (see docs/ALGORITHMS.md).
 *
 * Bit-exact with the Java reducers: the same IEEE operations in the same order (no FMA, no
 * fast-math, no flush-to-zero), two's-complement wrapping for integer SUM/PROD (done in unsigned
 * types, where wrapping is defined), signed comparison for MIN/MAX. A destination may be one of the
 * sources (in place): within each block all loads come before any store, and blocks move forward.
 */
#ifndef NCCL4J_CPU_KERNELS_H
#define NCCL4J_CPU_KERNELS_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

/* The order of io.nccl4j.cpu.Reduction.ArrayOp. */
enum {
    NCCL4J_F32_SUM, NCCL4J_F32_PROD, NCCL4J_F64_SUM, NCCL4J_F64_PROD,
    NCCL4J_I32_SUM, NCCL4J_I32_PROD, NCCL4J_I32_MIN, NCCL4J_I32_MAX,
    NCCL4J_I64_SUM, NCCL4J_I64_PROD, NCCL4J_I64_MIN, NCCL4J_I64_MAX,
    NCCL4J_OP_COUNT
};

/* Elements per block: 64 bytes of 32-bit or 128 bytes of 64-bit values, held in registers. */
#define NCCL4J_BLOCK 16

#define NCCL4J_DEFINE_REDUCE(NAME, ATTR, T, EXPR)                                              \
    ATTR static void NAME(const void* const* src, int ns, void* const* dst, int nd, size_t n) { \
        size_t i = 0;                                                                           \
        for (; i + NCCL4J_BLOCK <= n; i += NCCL4J_BLOCK) {                                      \
            T v[NCCL4J_BLOCK];                                                                  \
            const T* s0 = (const T*) src[0] + i;                                                \
            for (int j = 0; j < NCCL4J_BLOCK; j++) v[j] = s0[j];                                \
            for (int k = 1; k < ns; k++) {                                                      \
                const T* s = (const T*) src[k] + i;                                             \
                for (int j = 0; j < NCCL4J_BLOCK; j++) { T a = v[j], b = s[j]; v[j] = (EXPR); } \
            }                                                                                   \
            for (int d = 0; d < nd; d++) {                                                      \
                T* o = (T*) dst[d] + i;                                                         \
                for (int j = 0; j < NCCL4J_BLOCK; j++) o[j] = v[j];                             \
            }                                                                                   \
        }                                                                                       \
        for (; i < n; i++) {                                                                    \
            T v = ((const T*) src[0])[i];                                                       \
            for (int k = 1; k < ns; k++) { T a = v, b = ((const T*) src[k])[i]; v = (EXPR); }   \
            for (int d = 0; d < nd; d++) ((T*) dst[d])[i] = v;                                  \
        }                                                                                       \
    }

#define NCCL4J_DEFINE_ALL(SUFFIX, ATTR)                                                          \
    NCCL4J_DEFINE_REDUCE(f32_sum_##SUFFIX, ATTR, float, a + b)                                  \
    NCCL4J_DEFINE_REDUCE(f32_prod_##SUFFIX, ATTR, float, a * b)                                 \
    NCCL4J_DEFINE_REDUCE(f64_sum_##SUFFIX, ATTR, double, a + b)                                 \
    NCCL4J_DEFINE_REDUCE(f64_prod_##SUFFIX, ATTR, double, a * b)                                \
    NCCL4J_DEFINE_REDUCE(u32_sum_##SUFFIX, ATTR, uint32_t, a + b)                               \
    NCCL4J_DEFINE_REDUCE(u32_prod_##SUFFIX, ATTR, uint32_t, a * b)                 \
    NCCL4J_DEFINE_REDUCE(i32_min_##SUFFIX, ATTR, int32_t, a < b ? a : b)                        \
    NCCL4J_DEFINE_REDUCE(i32_max_##SUFFIX, ATTR, int32_t, a > b ? a : b)                        \
    NCCL4J_DEFINE_REDUCE(u64_sum_##SUFFIX, ATTR, uint64_t, a + b)                               \
    NCCL4J_DEFINE_REDUCE(u64_prod_##SUFFIX, ATTR, uint64_t, a * b)                              \
    NCCL4J_DEFINE_REDUCE(i64_min_##SUFFIX, ATTR, int64_t, a < b ? a : b)                        \
    NCCL4J_DEFINE_REDUCE(i64_max_##SUFFIX, ATTR, int64_t, a > b ? a : b)                        \
    static void (*const nccl4j_kernels_##SUFFIX[NCCL4J_OP_COUNT])(const void* const*, int,      \
                                                                   void* const*, int, size_t) = { \
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

/*
 * dst[d][i] = src[0][i] op src[1][i] op ... op src[ns-1][i] for every d < nd and i < n, where
 * sources and destinations are tables of addresses. Returns 0, or -1 for an unknown op or counts
 * out of range (nothing is touched then).
 */
static inline int nccl4j_reduce(int op, const void* const* src, int ns, void* const* dst, int nd, size_t n) {
    if (op < 0 || op >= NCCL4J_OP_COUNT || ns < 1 || nd < 0) {
        return -1;
    }
    static const bool avx2 = NCCL4J_HAS_AVX2();
    (avx2 ? nccl4j_kernels_avx2 : nccl4j_kernels_base)[op](src, ns, dst, nd, n);
    return 0;
}

/*
 * Waiting between processes (the CPU backend's windows in /dev/shm): sleeps while the 32-bit word at
 * addr holds expected, for at most timeout_nanos, until nccl4j_futex_wake on the same word (any
 * process mapping it: a shared futex, not FUTEX_PRIVATE). Returns 0 when woken, -1 otherwise (the
 * word had changed, the time ran out, or a signal came): the caller re-checks its condition.
 */
static inline int nccl4j_futex_wait(void* addr, int expected, long timeout_nanos) {
    struct timespec ts;
    ts.tv_sec = timeout_nanos / 1000000000L;
    ts.tv_nsec = timeout_nanos % 1000000000L;
    return syscall(SYS_futex, (int*) addr, FUTEX_WAIT, expected, &ts, NULL, 0) == 0 ? 0 : -1;
}

/* Wakes every process sleeping in nccl4j_futex_wait on the word at addr; returns how many, or -1. */
static inline int nccl4j_futex_wake(void* addr) {
    long n = syscall(SYS_futex, (int*) addr, FUTEX_WAKE, 0x7fffffff, NULL, NULL, 0);
    return n < 0 ? -1 : (int) n;
}

#endif
