/*
 * What limits a shared-memory AllReduce on this machine, measured in C without Java in the way
 * (docs/PERFORMANCE.md section 1). Four threads play four ranks of a 64 MiB float32 SUM AllReduce
 * with the `direct` layout (rank r reduces block r of every input and writes it to block r of every
 * output), in three loop shapes, out of place and in place, against the bound 2*p*S/B where B is
 * the bandwidth of two threads each copying 128 MiB (read + write counted), as `./nccl4j sweep
 * --bound` measures it:
 *   fused-store    one pass: load every input, add, store to every output (nccl4j's native kernel)
 *   fused-nt       the same with non-temporal stores
 *   staged-memcpy  reduce 32 KiB into scratch in cache, then memcpy it to every output (the shape of
 *                  the Java reducers, without their staging copies into heap arrays)
 * Build and run: gcc -O2 -mavx2 -pthread -o allreduce_shapes native/tools/experiments/allreduce_shapes.c
 *                && ./allreduce_shapes
 */
#include <immintrin.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define P 4
#define N (16L << 20) /* floats per rank: 64 MiB */
#define CH 8192       /* floats per chunk: 32 KiB */
#define COPY (128L << 20)

static float *in[P], *out[P], *scratch[P];
static int mode, inplace;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static __m256 sum4(long i) {
    return _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(_mm256_load_ps(in[0] + i), _mm256_load_ps(in[1] + i)),
                                       _mm256_load_ps(in[2] + i)), _mm256_load_ps(in[3] + i));
}

static void* rank_main(void* arg) {
    long r = (long) arg, q = N / P, first = r * q;
    float** o = inplace ? in : out;
    for (long c = first; c < first + q; c += CH) {
        if (mode < 2) {
            for (long i = c; i < c + CH; i += 8) {
                __m256 s = sum4(i);
                for (int k = 0; k < P; k++) {
                    if (mode == 0) _mm256_store_ps(o[k] + i, s); else _mm256_stream_ps(o[k] + i, s);
                }
            }
        } else {
            for (long i = 0; i < CH; i += 8) _mm256_store_ps(scratch[r] + i, sum4(c + i));
            for (int k = 0; k < P; k++) memcpy(o[k] + c, scratch[r], CH * sizeof(float));
        }
    }
    _mm_sfence();
    return NULL;
}

static char *copy_src[2], *copy_dst[2];
static void* copy_main(void* arg) {
    long t = (long) arg;
    memcpy(copy_dst[t], copy_src[t], COPY);
    return NULL;
}

static double run_threads(void* (*fn)(void*), int n) {
    pthread_t th[P];
    double t0 = now();
    for (long t = 0; t < n; t++) pthread_create(&th[t], NULL, fn, (void*) t);
    for (int t = 0; t < n; t++) pthread_join(th[t], NULL);
    return now() - t0;
}

int main(void) {
    for (int k = 0; k < P; k++) {
        in[k] = aligned_alloc(4096, N * sizeof(float));
        out[k] = aligned_alloc(4096, N * sizeof(float));
        scratch[k] = aligned_alloc(64, CH * sizeof(float));
        memset(in[k], 0, N * sizeof(float));
        memset(out[k], 0, N * sizeof(float));
    }
    for (int t = 0; t < 2; t++) {
        copy_src[t] = aligned_alloc(4096, COPY);
        copy_dst[t] = aligned_alloc(4096, COPY);
        memset(copy_src[t], 1, COPY);
        memset(copy_dst[t], 1, COPY);
    }
    const char* names[] = {"fused-store", "fused-nt", "staged-memcpy"};
    for (int round = 0; round < 3; round++) {
        double best = 1e9;
        for (int rep = 0; rep < 5; rep++) {
            double dt = run_threads(copy_main, 2);
            if (dt < best) best = dt;
        }
        double bw = 2.0 * 2 * COPY / best, bound = 2.0 * P * N * sizeof(float) / bw;
        printf("round %d: B %.1f GB/s, bound %.2f ms\n", round + 1, bw / 1e9, bound * 1e3);
        for (inplace = 0; inplace < 2; inplace++) {
            for (mode = 0; mode < 3; mode++) {
                double total = 0;
                for (int it = 0; it < 6; it++) {
                    double dt = run_threads(rank_main, P);
                    if (it > 0) total += dt; /* the first one warms up */
                }
                total /= 5;
                printf("  %-12s %-14s %6.2f ms  %4.0f%% of bound\n", inplace ? "in place" : "out of place",
                       names[mode], total * 1e3, 100 * bound / total);
            }
        }
    }
    return 0;
}
