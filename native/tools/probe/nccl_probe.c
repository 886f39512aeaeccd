/*
 * The native twin of `./nccl4j probe`: the kernel-evidence experiment written against NCCL directly.
 * One process drives every local GPU (ncclCommInitAll), one non-blocking stream per GPU, float32
 * buffers; warm-ups outside the ranges, then measured iterations inside the NVTX ranges "direct"
 * (ncclAllReduce) and "decomposed" (ncclReduceScatter then ncclAllGather). It counts the collective
 * launches per range, checks every output element, and prints the same table as the Java probe.
 *
 * Built with gcc alone: the CUDA runtime, NCCL and NVTX are resolved at run time with dlopen, so no
 * CUDA or NCCL headers are needed. Without a GPU (or without the libraries) it exits with status 2
 * and says why; it never crashes.
 *
 * It counts NCCL API calls (host calls), not kernels: only a profiler counts kernels.
 * --latency N also times N blocking 1 KiB AllReduce calls (launch + cudaStreamSynchronize) after 100
 * warm-ups, the figure ./nccl4j probe --latency prints beside it.
 *
 * --op avg reduces with ncclAvg instead of ncclSum: at one rank NCCL runs it as a PreMulSum kernel
 * (the SUM of one rank is a copy, no kernel), which a profiler can count.
 *
 * It loads the CUDA runtime and NCCL before it looks for a GPU, so that a wrong library path shows
 * on a machine without one too.
 *
 * usage: nccl_probe [--size BYTES] [--warmups N] [--iterations N] [--devices N] [--latency N] [--op sum|avg]
 * libraries: $NCCL4J_CUDART_PATH or libcudart.so.13/.12; $NCCL4J_NCCL_PATH or libnccl.so.2;
 *            $NCCL4J_NVTX3_PATH / $NCCL4J_NVTX_PATH or libnvtx3interop.so.1 / libnvToolsExt.so.1 (optional).
 */
#include <dlfcn.h>
#include <stdio.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEV 64
#define PERIOD 1024

typedef int (*cudaGetDeviceCount_t)(int*);
typedef const char* (*cudaGetErrorString_t)(int);
typedef int (*cudaSetDevice_t)(int);
typedef int (*cudaStreamCreateWithFlags_t)(void**, unsigned int);
typedef int (*cudaStreamSynchronize_t)(void*);
typedef int (*cudaStreamDestroy_t)(void*);
typedef int (*cudaMalloc_t)(void**, size_t);
typedef int (*cudaFree_t)(void*);
typedef int (*cudaMemcpy_t)(void*, const void*, size_t, int);
typedef int (*ncclGetVersion_t)(int*);
typedef const char* (*ncclGetErrorString_t)(int);
typedef int (*ncclCommInitAll_t)(void**, int, const int*);
typedef int (*ncclCommDestroy_t)(void*);
typedef int (*ncclGroup_t)(void);
typedef int (*ncclAllReduce_t)(const void*, void*, size_t, int, int, void*, void*);
typedef int (*ncclReduceScatter_t)(const void*, void*, size_t, int, int, void*, void*);
typedef int (*ncclAllGather_t)(const void*, void*, size_t, int, void*, void*);
typedef int (*nvtxRangePushA_t)(const char*);
typedef int (*nvtxRangePop_t)(void);

static cudaGetDeviceCount_t cudaGetDeviceCount_;
static cudaGetErrorString_t cudaGetErrorString_;
static cudaSetDevice_t cudaSetDevice_;
static cudaStreamCreateWithFlags_t cudaStreamCreateWithFlags_;
static cudaStreamSynchronize_t cudaStreamSynchronize_;
static cudaStreamDestroy_t cudaStreamDestroy_;
static cudaMalloc_t cudaMalloc_;
static cudaFree_t cudaFree_;
static cudaMemcpy_t cudaMemcpy_;
static ncclGetVersion_t ncclGetVersion_;
static ncclGetErrorString_t ncclGetErrorString_;
static ncclCommInitAll_t ncclCommInitAll_;
static ncclCommDestroy_t ncclCommDestroy_;
static ncclGroup_t ncclGroupStart_;
static ncclGroup_t ncclGroupEnd_;
static ncclAllReduce_t ncclAllReduce_;
static ncclReduceScatter_t ncclReduceScatter_;
static ncclAllGather_t ncclAllGather_;
static nvtxRangePushA_t nvtxRangePushA_;
static nvtxRangePop_t nvtxRangePop_;

enum { NCCL_FLOAT32 = 7, NCCL_SUM = 0, NCCL_AVG = 4, MEMCPY_DEFAULT = 4, STREAM_NON_BLOCKING = 1 };

static void* open_first(const char* env, const char** names) {
    const char* explicit_path = getenv(env);
    if (explicit_path && explicit_path[0]) {
        return dlopen(explicit_path, RTLD_NOW | RTLD_GLOBAL);
    }
    for (int i = 0; names[i]; i++) {
        void* h = dlopen(names[i], RTLD_NOW | RTLD_GLOBAL);
        if (h) {
            return h;
        }
    }
    return NULL;
}

#define SYM(lib, var, name)                                                               \
    do {                                                                                  \
        *(void**) (&var) = dlsym(lib, name);                                              \
        if (!var) {                                                                       \
            fprintf(stderr, "nccl_probe: %s lacks %s\n", #lib, name);                     \
            return 2;                                                                     \
        }                                                                                 \
    } while (0)

static int load(void) {
    const char* cudart_names[] = {"libcudart.so.13", "libcudart.so.12", "libcudart.so", NULL};
    const char* nccl_names[] = {"libnccl.so.2", NULL};
    const char* nvtx_names[] = {"libnvtx3interop.so.1", "libnvToolsExt.so.1", NULL};
    void* cudart = open_first("NCCL4J_CUDART_PATH", cudart_names);
    if (!cudart) {
        fprintf(stderr, "nccl_probe: no CUDA runtime (libcudart.so.13/.12) could be loaded: %s\n", dlerror());
        return 2;
    }
    SYM(cudart, cudaGetDeviceCount_, "cudaGetDeviceCount");
    SYM(cudart, cudaGetErrorString_, "cudaGetErrorString");
    SYM(cudart, cudaSetDevice_, "cudaSetDevice");
    SYM(cudart, cudaStreamCreateWithFlags_, "cudaStreamCreateWithFlags");
    SYM(cudart, cudaStreamSynchronize_, "cudaStreamSynchronize");
    SYM(cudart, cudaStreamDestroy_, "cudaStreamDestroy");
    SYM(cudart, cudaMalloc_, "cudaMalloc");
    SYM(cudart, cudaFree_, "cudaFree");
    SYM(cudart, cudaMemcpy_, "cudaMemcpy");
    void* nccl = open_first("NCCL4J_NCCL_PATH", nccl_names);
    if (!nccl) {
        fprintf(stderr, "nccl_probe: libnccl.so.2 could not be loaded: %s\n", dlerror());
        return 2;
    }
    SYM(nccl, ncclGetVersion_, "ncclGetVersion");
    SYM(nccl, ncclGetErrorString_, "ncclGetErrorString");
    SYM(nccl, ncclCommInitAll_, "ncclCommInitAll");
    SYM(nccl, ncclCommDestroy_, "ncclCommDestroy");
    SYM(nccl, ncclGroupStart_, "ncclGroupStart");
    SYM(nccl, ncclGroupEnd_, "ncclGroupEnd");
    SYM(nccl, ncclAllReduce_, "ncclAllReduce");
    SYM(nccl, ncclReduceScatter_, "ncclReduceScatter");
    SYM(nccl, ncclAllGather_, "ncclAllGather");
    int n = 0;
    int rc = cudaGetDeviceCount_(&n);
    if (rc != 0 || n == 0) {
        int v = 0;
        ncclGetVersion_(&v);
        fprintf(stderr, "nccl_probe: no CUDA device: %s (NCCL %d.%d.%d loaded)\n",
                rc != 0 ? cudaGetErrorString_(rc) : "cudaGetDeviceCount returned 0", v / 10000, v / 100 % 100,
                v % 100);
        return 2;
    }
    const char* nvtx_env = getenv("NCCL4J_NVTX3_PATH") ? "NCCL4J_NVTX3_PATH" : "NCCL4J_NVTX_PATH";
    void* nvtx = open_first(nvtx_env, nvtx_names);
    if (nvtx) {
        *(void**) (&nvtxRangePushA_) = dlsym(nvtx, "nvtxRangePushA");
        *(void**) (&nvtxRangePop_) = dlsym(nvtx, "nvtxRangePop");
    }
    return 0;
}

#define CUDA(call)                                                                         \
    do {                                                                                   \
        int e_ = (call);                                                                   \
        if (e_ != 0) {                                                                     \
            fprintf(stderr, "nccl_probe: %s failed: %s\n", #call, cudaGetErrorString_(e_)); \
            return 1;                                                                      \
        }                                                                                  \
    } while (0)
#define NCCL(call)                                                                         \
    do {                                                                                   \
        int r_ = (call);                                                                   \
        if (r_ != 0) {                                                                     \
            fprintf(stderr, "nccl_probe: %s failed: %s\n", #call, ncclGetErrorString_(r_)); \
            return 1;                                                                      \
        }                                                                                  \
    } while (0)

static void push(const char* name) {
    if (nvtxRangePushA_) {
        nvtxRangePushA_(name);
    }
}

static void pop(void) {
    if (nvtxRangePop_) {
        nvtxRangePop_();
    }
}

int main(int argc, char** argv) {
    size_t bytes = 64u << 20;
    int warmups = 2, iterations = 5, devices = 0, latency = 0, op = NCCL_SUM;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--size") && i + 1 < argc) {
            bytes = strtoull(argv[++i], NULL, 10);
        } else if (!strcmp(argv[i], "--warmups") && i + 1 < argc) {
            warmups = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--iterations") && i + 1 < argc) {
            iterations = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--devices") && i + 1 < argc) {
            devices = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--latency") && i + 1 < argc) {
            latency = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--op") && i + 1 < argc && (!strcmp(argv[i + 1], "sum") || !strcmp(argv[i + 1], "avg"))) {
            op = !strcmp(argv[++i], "avg") ? NCCL_AVG : NCCL_SUM;
        } else {
            fprintf(stderr, "usage: nccl_probe [--size BYTES] [--warmups N] [--iterations N] [--devices N] [--latency N]"
                    " [--op sum|avg]\n");
            return 2;
        }
    }
    int rc = load();
    if (rc != 0) {
        return rc;
    }
    int n = 0;
    CUDA(cudaGetDeviceCount_(&n));
    if (devices > 0 && devices < n) {
        n = devices;
    }
    if (n > MAX_DEV) {
        n = MAX_DEV;
    }
    int version = 0;
    NCCL(ncclGetVersion_(&version));
    size_t count = bytes / 4 / n * n;
    size_t q = count / n;
    int devs[MAX_DEV];
    void* comms[MAX_DEV];
    void* streams[MAX_DEV];
    float *in[MAX_DEV], *out[MAX_DEV], *shard[MAX_DEV], *gathered[MAX_DEV];
    for (int d = 0; d < n; d++) {
        devs[d] = d;
    }
    NCCL(ncclCommInitAll_(comms, n, devs));
    float* host = (float*) malloc(count * sizeof(float));
    if (!host) {
        fprintf(stderr, "nccl_probe: out of host memory\n");
        return 1;
    }
    for (int d = 0; d < n; d++) {
        CUDA(cudaSetDevice_(d));
        CUDA(cudaStreamCreateWithFlags_(&streams[d], STREAM_NON_BLOCKING));
        CUDA(cudaMalloc_((void**) &in[d], count * 4));
        CUDA(cudaMalloc_((void**) &out[d], count * 4));
        CUDA(cudaMalloc_((void**) &shard[d], q * 4));
        CUDA(cudaMalloc_((void**) &gathered[d], count * 4));
        for (size_t i = 0; i < count; i++) {
            host[i] = (float) (i % PERIOD + (size_t) d * PERIOD);
        }
        CUDA(cudaMemcpy_(in[d], host, count * 4, MEMCPY_DEFAULT));
    }
    int launches[2][3] = {{0}};  /* [range][allreduce, reducescatter, allgather] */
    struct timespec t0, t1;
    for (int it = -warmups; it < 2 * iterations; it++) {
        int measured = it >= 0;
        int decomposed = it >= iterations;
        if (it == 0) {
            push("direct");
        } else if (it == iterations) {
            pop();
            push("decomposed");
        }
        if (!decomposed || !measured) {
            NCCL(ncclGroupStart_());
            for (int d = 0; d < n; d++) {
                NCCL(ncclAllReduce_(in[d], out[d], count, NCCL_FLOAT32, op, comms[d], streams[d]));
                if (measured) launches[0][0]++;
            }
            NCCL(ncclGroupEnd_());
        }
        if (decomposed || !measured) {
            NCCL(ncclGroupStart_());
            for (int d = 0; d < n; d++) {
                NCCL(ncclReduceScatter_(in[d], shard[d], q, NCCL_FLOAT32, op, comms[d], streams[d]));
                if (measured) launches[1][1]++;
            }
            NCCL(ncclGroupEnd_());
            NCCL(ncclGroupStart_());
            for (int d = 0; d < n; d++) {
                NCCL(ncclAllGather_(shard[d], gathered[d], q, NCCL_FLOAT32, comms[d], streams[d]));
                if (measured) launches[1][2]++;
            }
            NCCL(ncclGroupEnd_());
        }
    }
    pop();
    long wrong[2] = {0, 0};
    for (int d = 0; d < n; d++) {
        CUDA(cudaSetDevice_(d));
        CUDA(cudaStreamSynchronize_(streams[d]));
        for (int k = 0; k < 2; k++) {
            CUDA(cudaMemcpy_(host, k == 0 ? out[d] : gathered[d], count * 4, MEMCPY_DEFAULT));
            for (size_t i = 0; i < count; i++) {
                double sum = (double) n * (i % PERIOD) + (double) PERIOD * n * (n - 1) / 2;
                if (op == NCCL_SUM) {
                    if (host[i] != (float) sum) wrong[k]++;
                } else {
                    /* AVG is a PreMulSum by (float) 1/n: within a few float32 roundings of the mean. */
                    double mean = sum / n, err = host[i] - mean;
                    if ((err < 0 ? -err : err) > 1e-5 * (mean < 1 ? 1 : mean)) wrong[k]++;
                }
            }
        }
    }
    int expect = iterations * n;
    printf("nccl_probe: NCCL %d.%d.%d, %d GPU(s), %zu float32 per rank, %s, %d warm-ups, %d iterations per range,"
           " NVTX %s\n", version / 10000, version / 100 % 100, version % 100, n, count, op == NCCL_AVG ? "AVG" : "SUM",
           warmups, iterations, nvtxRangePushA_ ? "loaded" : "not loaded");
    printf("counted per range: NCCL API calls (host calls), not kernels\n");
    printf("range      | AllReduce | ReduceScatter | AllGather | total | expected\n");
    printf("direct     | %-9d | %-13d | %-9d | %-5d | %d AllReduce\n", launches[0][0], launches[0][1],
           launches[0][2], launches[0][0] + launches[0][1] + launches[0][2], expect);
    printf("decomposed | %-9d | %-13d | %-9d | %-5d | %d ReduceScatter + %d AllGather\n", launches[1][0],
           launches[1][1], launches[1][2], launches[1][0] + launches[1][1] + launches[1][2], expect, expect);
    printf("endpoint correctness: direct %ld wrong, decomposed %ld wrong\n", wrong[0], wrong[1]);
    if (latency > 0) {
        /* 256 float32 per rank: each iteration is one blocking AllReduce (every GPU, one group). */
        for (int it = -100; it < latency; it++) {
            if (it == 0) {
                clock_gettime(CLOCK_MONOTONIC, &t0);
            }
            NCCL(ncclGroupStart_());
            for (int d = 0; d < n; d++) {
                NCCL(ncclAllReduce_(in[d], out[d], 256, NCCL_FLOAT32, NCCL_SUM, comms[d], streams[d]));
            }
            NCCL(ncclGroupEnd_());
            for (int d = 0; d < n; d++) {
                CUDA(cudaStreamSynchronize_(streams[d]));
            }
        }
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double us = ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / 1e3 / latency;
        printf("latency: %.2f us per blocking 1 KiB AllReduce (%d iterations after 100 warm-ups)\n", us, latency);
    }
    for (int d = 0; d < n; d++) {
        cudaSetDevice_(d);
        cudaFree_(in[d]);
        cudaFree_(out[d]);
        cudaFree_(shard[d]);
        cudaFree_(gathered[d]);
        cudaStreamDestroy_(streams[d]);
        ncclCommDestroy_(comms[d]);
    }
    free(host);
    int ok = wrong[0] == 0 && wrong[1] == 0 && launches[0][0] == expect && launches[1][1] == expect &&
             launches[1][2] == expect;
    return ok ? 0 : 1;
}
