/*
 * The MPI twin of `./nccl4j patterns`: the same timing patterns, the same data, the same checks and the same
 * table, against MPI_Allreduce and MPI_Barrier (Open MPI), so that ci/bench-mpi.sh can put the two side by side.
 *
 * Every rank's float32 input element i is (i mod 1024) + 1024 * rank, so every sum over up to 8 ranks is an exact
 * float32 integer: element i of the SUM over p ranks is p * (i mod 1024) + 1024 * p(p-1)/2. All-reduce is out of
 * place. The output is filled with NaN before every call (or before every loop), every call's (or loop's) output is
 * checked element by element afterwards, and the input is checked once per size; any wrong element makes the run
 * exit 1. None of this is inside a timed region.
 *
 * The run, in this order (rank 0 prints one table):
 *   warm-up          --warmup-rounds rounds of (barrier, 1 KiB all-reduce), untimed (default 5000).
 *   barrier          MPI_Barrier; then time one MPI_Barrier, per rank; per call the maximum over ranks; median,
 *                    p99 (nearest rank) and max over the calls.
 *   per size S:
 *     barrier-before MPI_Barrier; then time one all-reduce, per rank; per call the maximum over ranks; median, p99,
 *                    max over the calls.
 *     back-to-back   no barrier: time a loop of C calls; per-call time = loop time / C, the maximum over ranks.
 *     arrival-skew   before every call each rank busy-waits a pseudo-random 0..500 us (the LCG below); the loop's
 *                    wall time per step, the maximum over ranks. The floor of a step is the mean over the steps of
 *                    the largest delay of any rank, which every rank can compute and the table's note prints.
 *   oversubscribed   barrier-before at 1 KiB with --oversubscribed calls (default 10000): median, p99, p99/median
 *                    and the number of calls over 4 ms (a scheduler quantum).
 * Before each pattern at each size, max(2, C/10) untimed calls of that pattern (--warmups N: N). C, the timed calls
 * per size, is --calls N, else clamp(2^27 / S, 10, 1000): 1000 at 1 KiB and 64 KiB, 128 at 1 MiB, 10 at 16 and 64
 * MiB; the barrier takes C of 1 KiB.
 *
 * The arrival-skew delays: a 64-bit LCG seeded with x = rank + 1 at the start of every size's timed steps; before
 * every step x = x * 6364136223846793005 + 1442695040888963407 (mod 2^64), delay_us = (x >> 33) mod 501. The Java
 * twin (io.nccl4j.cli.PatternsCommand) uses the same sequence.
 *
 * usage: mpi_patterns [--sizes 1K,64K,1M,16M,64M] [--calls N] [--warmups N] [--warmup-rounds N]
 *                     [--oversubscribed N] [--inject-wrong]
 *   --inject-wrong: the last rank spoils one element of its first checked output, to prove that the check fails
 *   the run (exit 1).
 * build: mpicc -O2 -o mpi_patterns native/tools/bench/mpi_patterns.c
 * run:   mpirun --allow-run-as-root --oversubscribe -np 4 ./mpi_patterns
 */
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PERIOD 1024
#define MAX_SIZES 32
#define QUANTUM_US 4000.0

static int rank, nranks;
static int inject_wrong;

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static void spin_us(double us) {
  double end = now_us() + us;
  while (now_us() < end) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  }
}

/* The arrival-skew sequence: advance x, then the delay in microseconds (0..500). */
static uint64_t lcg_next(uint64_t *x) {
  *x = *x * 6364136223846793005ULL + 1442695040888963407ULL;
  return (*x >> 33) % 501;
}

static float value(int r, size_t i) { return (float) (i % PERIOD + (size_t) r * PERIOD); }

static float sum(int p, size_t i) { return (float) (p * (i % PERIOD) + (size_t) PERIOD * p * (p - 1) / 2); }

static void poison(float *out, size_t n) { memset(out, 0xff, n * sizeof(float)); /* NaN */ }

/* Elements of out that differ from the sum over all ranks. */
static long wrong_sum(float *out, size_t n) {
  if (inject_wrong && rank == nranks - 1) {
    out[0] = -1.0f;
    inject_wrong = 0;
  }
  long wrong = 0;
  for (size_t i = 0; i < n; i++) {
    if (out[i] != sum(nranks, i)) {
      wrong++;
    }
  }
  return wrong;
}

static long wrong_input(const float *in, size_t n) {
  long wrong = 0;
  for (size_t i = 0; i < n; i++) {
    if (in[i] != value(rank, i)) {
      wrong++;
    }
  }
  return wrong;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *) a, y = *(const double *) b;
  return x < y ? -1 : x > y;
}

typedef struct {
  double median, p99, max;
  long over_quantum;
} stats_t;

/* Median (mean of the two middle values when n is even), p99 by the nearest rank, max; sorts v. */
static stats_t stats(double *v, int n) {
  qsort(v, n, sizeof(double), cmp_double);
  stats_t s;
  s.median = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
  s.p99 = v[(int) ceil(0.99 * n) - 1];
  s.max = v[n - 1];
  s.over_quantum = 0;
  for (int i = 0; i < n; i++) {
    if (v[i] > QUANTUM_US) {
      s.over_quantum++;
    }
  }
  return s;
}

static void max_over_ranks(double *v, int n) { MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD); }

static long sum_over_ranks(long v) {
  long out;
  MPI_Allreduce(&v, &out, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  return out;
}

static void format_size(size_t bytes, char *buf, size_t len) {
  if (bytes >= (1u << 20) && bytes % (1u << 20) == 0) {
    snprintf(buf, len, "%zu MiB", bytes >> 20);
  } else if (bytes >= (1u << 10) && bytes % (1u << 10) == 0) {
    snprintf(buf, len, "%zu KiB", bytes >> 10);
  } else {
    snprintf(buf, len, "%zu B", bytes);
  }
}

static size_t parse_size(const char *s) {
  char *end;
  double v = strtod(s, &end);
  size_t mult = 1;
  if (*end == 'K' || *end == 'k') {
    mult = 1u << 10;
  } else if (*end == 'M' || *end == 'm') {
    mult = 1u << 20;
  } else if (*end == 'G' || *end == 'g') {
    mult = 1u << 30;
  }
  return (size_t) v * mult;
}

static int auto_calls(size_t bytes) {
  size_t c = ((size_t) 1 << 27) / bytes;
  return c < 10 ? 10 : c > 1000 ? 1000 : (int) c;
}

static int warmups_for(int calls, int option) {
  if (option >= 0) {
    return option;
  }
  return calls / 10 < 2 ? 2 : calls / 10;
}

/* One table row, the columns of `./nccl4j patterns`. */
static void row(const char *pattern, const char *size, int calls, const char *median, const char *p99,
    const char *max, const char *ratio, const char *over, long wrong) {
  if (rank == 0) {
    printf("%-14s | %-7s | %-5d | %-9s | %-9s | %-9s | %-10s | %-9s | %ld\n", pattern, size, calls, median, p99, max,
        ratio, over, wrong);
  }
}

static void row_stats(const char *pattern, const char *size, int calls, stats_t s, long wrong) {
  char m[32], p[32], x[32], r[32], o[32];
  snprintf(m, sizeof m, "%.1f", s.median);
  snprintf(p, sizeof p, "%.1f", s.p99);
  snprintf(x, sizeof x, "%.1f", s.max);
  snprintf(r, sizeof r, "%.2f", s.p99 / s.median);
  snprintf(o, sizeof o, "%ld", s.over_quantum);
  row(pattern, size, calls, m, p, x, r, o, wrong);
}

static void row_one(const char *pattern, const char *size, int calls, double us, long wrong) {
  char m[32];
  snprintf(m, sizeof m, "%.1f", us);
  row(pattern, size, calls, m, "-", "-", "-", "-", wrong);
}

/* barrier-before: returns the wrong elements of this rank; times[] gets the maximum over ranks per call. */
static long barrier_before(float *in, float *out, size_t n, int warmups, int calls, double *times) {
  long wrong = 0;
  for (int c = -warmups; c < calls; c++) {
    poison(out, n);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = now_us();
    MPI_Allreduce(in, out, (int) n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    double t = now_us() - t0;
    if (c >= 0) {
      times[c] = t;
    }
    wrong += wrong_sum(out, n);
  }
  max_over_ranks(times, calls);
  return wrong;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  size_t sizes[MAX_SIZES];
  double floors[MAX_SIZES];
  int nsizes = 0;
  int calls_option = 0, warmups_option = -1, warmup_rounds = 5000, oversubscribed = 10000;
  const char *size_list = "1K,64K,1M,16M,64M";
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--inject-wrong")) {
      inject_wrong = 1;
    } else if (v && !strcmp(a, "--sizes")) {
      size_list = v, i++;
    } else if (v && !strcmp(a, "--calls")) {
      calls_option = atoi(v), i++;
    } else if (v && !strcmp(a, "--warmups")) {
      warmups_option = atoi(v), i++;
    } else if (v && !strcmp(a, "--warmup-rounds")) {
      warmup_rounds = atoi(v), i++;
    } else if (v && !strcmp(a, "--oversubscribed")) {
      oversubscribed = atoi(v), i++;
    } else {
      if (rank == 0) {
        fprintf(stderr, "usage: mpi_patterns [--sizes LIST] [--calls N] [--warmups N] [--warmup-rounds N] "
            "[--oversubscribed N] [--inject-wrong]\n");
      }
      MPI_Finalize();
      return 2;
    }
  }
  char list[256];
  snprintf(list, sizeof list, "%s", size_list);
  for (char *tok = strtok(list, ","); tok && nsizes < MAX_SIZES; tok = strtok(NULL, ",")) {
    sizes[nsizes] = parse_size(tok);
    if (sizes[nsizes] < 4 || calls_option < 0 || warmup_rounds < 0 || oversubscribed < 0) {
      if (rank == 0) {
        fprintf(stderr, "mpi_patterns: sizes must be >= 4 bytes and counts >= 0 (got '%s')\n", tok);
      }
      MPI_Finalize();
      return 2;
    }
    nsizes++;
  }
  if (nranks > 8) {
    if (rank == 0) {
      fprintf(stderr, "mpi_patterns: at most 8 ranks (the sums stay exact in float32 up to 8)\n");
    }
    MPI_Finalize();
    return 2;
  }

  char version[MPI_MAX_LIBRARY_VERSION_STRING];
  int vlen;
  MPI_Get_library_version(version, &vlen);
  version[strcspn(version, ",\n")] = 0;
  int calls1k = calls_option > 0 ? calls_option : auto_calls(1024);
  if (rank == 0) {
    printf("# patterns: %s, %d ranks, float32 SUM all-reduce, out of place\n", version, nranks);
    printf("# %d warm-up rounds (barrier, 1 KiB all-reduce); per pattern and size %s untimed calls, then C timed "
        "calls (%s); times: per call the maximum over ranks\n", warmup_rounds,
        warmups_option >= 0 ? "--warmups" : "max(2, C/10)", calls_option > 0 ? "--calls" : "C = clamp(2^27/S, 10, 1000)");
    printf("%-14s | %-7s | %-5s | %-9s | %-9s | %-9s | %-10s | %-9s | %s\n", "pattern", "size", "calls",
        "median us", "p99 us", "max us", "p99/median", "over 4 ms", "wrong");
  }

  long total_wrong = 0;
  size_t max_bytes = 1024;
  for (int s = 0; s < nsizes; s++) {
    max_bytes = sizes[s] > max_bytes ? sizes[s] : max_bytes;
  }
  size_t max_n = max_bytes / 4;
  float *in = malloc(max_n * sizeof(float));
  float *out = malloc(max_n * sizeof(float));
  int max_calls = oversubscribed > 1000 ? oversubscribed : 1000;
  if (calls_option > max_calls) {
    max_calls = calls_option;
  }
  double *times = malloc((size_t) max_calls * sizeof(double));
  if (!in || !out || !times) {
    fprintf(stderr, "mpi_patterns: out of memory\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  for (size_t i = 0; i < max_n; i++) {
    in[i] = value(rank, i);
  }

  /* warm-up */
  long wrong = 0;
  for (int w = 0; w < warmup_rounds; w++) {
    poison(out, 256);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Allreduce(in, out, 256, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    if (w == 0 || w == warmup_rounds - 1) {
      wrong += wrong_sum(out, 256);
    }
  }
  long warm_wrong = sum_over_ranks(wrong); /* reported on the barrier's row */
  total_wrong += warm_wrong;

  /* barrier */
  int bw = warmups_for(calls1k, warmups_option);
  for (int c = -bw; c < calls1k; c++) {
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = now_us();
    MPI_Barrier(MPI_COMM_WORLD);
    double t = now_us() - t0;
    if (c >= 0) {
      times[c] = t;
    }
  }
  max_over_ranks(times, calls1k);
  row_stats("barrier", "-", calls1k, stats(times, calls1k), warm_wrong);

  for (int s = 0; s < nsizes; s++) {
    size_t n = sizes[s] / 4;
    int calls = calls_option > 0 ? calls_option : auto_calls(sizes[s]);
    int warmups = warmups_for(calls, warmups_option);
    char size[32];
    format_size(n * 4, size, sizeof size);

    wrong = sum_over_ranks(barrier_before(in, out, n, warmups, calls, times));
    total_wrong += wrong;
    row_stats("barrier-before", size, calls, stats(times, calls), wrong);

    wrong = 0;
    for (int pass = 0; pass < 2; pass++) {
      int k = pass == 0 ? warmups : calls;
      poison(out, n);
      MPI_Barrier(MPI_COMM_WORLD);
      double t0 = now_us();
      for (int c = 0; c < k; c++) {
        MPI_Allreduce(in, out, (int) n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      }
      times[0] = (now_us() - t0) / (k > 0 ? k : 1);
      wrong += k > 0 ? wrong_sum(out, n) : 0;
    }
    max_over_ranks(times, 1);
    wrong = sum_over_ranks(wrong);
    total_wrong += wrong;
    row_one("back-to-back", size, calls, times[0], wrong);

    wrong = 0;
    for (int c = 0; c < warmups; c++) {
      MPI_Allreduce(in, out, (int) n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    }
    /* The floor: every rank's sequence is known to every rank. */
    double floor_us = 0;
    uint64_t seeds[8];
    for (int r = 0; r < nranks; r++) {
      seeds[r] = (uint64_t) r + 1;
    }
    for (int c = 0; c < calls; c++) {
      uint64_t largest = 0;
      for (int r = 0; r < nranks; r++) {
        uint64_t d = lcg_next(&seeds[r]);
        largest = d > largest ? d : largest;
      }
      floor_us += (double) largest;
    }
    floor_us /= calls;
    uint64_t x = (uint64_t) rank + 1;
    poison(out, n);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = now_us();
    for (int c = 0; c < calls; c++) {
      spin_us((double) lcg_next(&x));
      MPI_Allreduce(in, out, (int) n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    }
    times[0] = (now_us() - t0) / calls;
    wrong += wrong_sum(out, n);
    wrong += wrong_input(in, n);
    max_over_ranks(times, 1);
    wrong = sum_over_ranks(wrong);
    total_wrong += wrong;
    row_one("arrival-skew", size, calls, times[0], wrong);
    floors[s] = floor_us;
  }

  if (oversubscribed > 0) {
    int warmups = warmups_for(calls1k, warmups_option);
    wrong = sum_over_ranks(barrier_before(in, out, 256, warmups, oversubscribed, times));
    total_wrong += wrong;
    row_stats("oversubscribed", "1 KiB", oversubscribed, stats(times, oversubscribed), wrong);
  }
  for (int s = 0; s < nsizes && rank == 0; s++) {
    char size[32];
    format_size(sizes[s] / 4 * 4, size, sizeof size);
    printf("# arrival-skew %s: the largest delay of a step averages %.1f us (the floor of a step)\n", size, floors[s]);
  }
  if (rank == 0) {
    printf("# wrong elements: %ld %s\n", total_wrong, total_wrong == 0 ? "OK" : "FAILED");
    fflush(stdout);
  }
  free(in);
  free(out);
  free(times);
  MPI_Finalize();
  return total_wrong == 0 ? 0 : 1;
}
