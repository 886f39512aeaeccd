package io.nccl4j.cpu;

import static org.assertj.core.api.Assertions.assertThat;

import io.nccl4j.DType;
import io.nccl4j.LocalCluster;
import io.nccl4j.ProcessGroup;
import io.nccl4j.ReduceOp;
import io.nccl4j.Tensor;
import io.nccl4j.Work;
import io.nccl4j.internal.transport.shm.ShmThreadsCluster;
import io.nccl4j.memory.NativeMemory;
import io.nccl4j.testing.TestData;
import io.nccl4j.testing.TestTime;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.function.IntFunction;
import java.util.stream.Stream;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * The hierarchical AllReduce and ReduceScatter of processes on several hosts (shared memory within each host, TCP
 * across), with ranks as threads that each map their host's segments and claim a host of their own
 * choosing ({@link ShmThreadsCluster}). The floating-point data is order-sensitive (mixed
 * magnitudes), so the results must follow the documented order bit for bit: each host's ranks in
 * rank order, then the hosts' partials (two hosts here, so the hosts' order cannot show; three hosts
 * with integers, exact in any order); the premultiplication of AVG once per input and integer AVG's
 * division once at the end. Hosts are interleaved ({0, 2} and {1, 3}) and contiguous ({0, 1, 2} and
 * {3, 4, 5}); tensors from the group (in the segments) and from elsewhere (copied through the segment).
 * Three variants: the native kernels (the fused AllReduce where it runs), the Java reducers, and the
 * native kernels with the phased AllReduce ({@link CpuOptions.Algorithms#PHASED}).
 */
@Tag("multirank")
class HierarchicalReductionsTest {
  private static final Duration TIMEOUT = TestTime.seconds(60);

  @TempDir
  static Path segments;

  /** Hosts, as the group's ranks on each. */
  private static final int[][] INTERLEAVED = {{0, 2}, {1, 3}};
  private static final int[][] CONTIGUOUS = {{0, 1, 2}, {3, 4, 5}};

  private static final String[] VARIANTS = {"native", "java", "phased"};

  static Stream<Arguments> cases() {
    List<Arguments> out = new ArrayList<>();
    Object[][] ops = {
      {DType.FLOAT32, ReduceOp.SUM}, {DType.FLOAT64, ReduceOp.PRODUCT}, {DType.INT32, ReduceOp.MAX},
      {DType.INT64, ReduceOp.SUM}, {DType.INT64, ReduceOp.AVG}, {DType.FLOAT32, ReduceOp.AVG},
      {DType.FLOAT32, ReduceOp.MIN}};
    for (String kernels : VARIANTS) {
      for (int[][] hosts : new int[][][] {INTERLEAVED, CONTIGUOUS}) {
        // 1 001 elements: one-shot within each host; 40 003: blocks of unequal length per local rank.
        for (long count : new long[] {1001, 40_003}) {
          for (Object[] op : ops) {
            out.add(Arguments.of(kernels, hosts, count, op[0], op[1]));
          }
        }
      }
    }
    return out.stream();
  }

  /** x ⊕ y in the element type (AVG: the sum of premultiplied floats, or of integers). */
  private static double combine(DType t, ReduceOp op, double x, double y) {
    double v = op == ReduceOp.PRODUCT ? x * y : op == ReduceOp.MIN ? Math.min(x, y)
        : op == ReduceOp.MAX ? Math.max(x, y) : x + y;
    return t == DType.FLOAT32 ? (float) v : v;
  }

  /** The bits expected at element i: each host's ranks folded in rank order, then the hosts'. */
  private static long expectedBits(DType t, ReduceOp op, int[][] hosts, long i) {
    int p = hosts.length * hosts[0].length;
    if (t == DType.INT64) {
      long acc = 0;
      for (int[] host : hosts) {
        for (int r : host) {
          acc += TestData.mix(((long) r << 40) ^ i);
        }
      }
      return op == ReduceOp.AVG ? acc / p : acc;
    }
    if (t == DType.INT32) {
      int acc = Integer.MIN_VALUE;
      for (int[] host : hosts) {
        for (int r : host) {
          acc = Math.max(acc, (int) OrderSensitiveData.value(t, r, i));
        }
      }
      return acc;
    }
    float scale = op == ReduceOp.AVG ? 1.0f / p : 1.0f;
    double across = Double.NaN;
    for (int[] host : hosts) {
      double partial = Double.NaN;
      for (int r : host) {
        double x = OrderSensitiveData.value(t, r, i);
        if (op == ReduceOp.AVG) {
          x = (float) x * scale;
        }
        partial = Double.isNaN(partial) ? x : combine(t, op, partial, x);
      }
      across = Double.isNaN(across) ? partial : combine(t, op, across, partial);
    }
    return t == DType.FLOAT32 ? Float.floatToRawIntBits((float) across) : Double.doubleToRawLongBits(across);
  }

  private static long bits(Tensor t, long i) {
    long a = t.address() + i * t.dtype().size();
    return t.dtype().size() == 4 ? NativeMemory.getInt(a) : NativeMemory.getLong(a);
  }

  private static void assertReduced(Tensor t, DType dtype, ReduceOp op, int[][] hosts, String what) {
    assertReduced(t, 0, dtype, op, hosts, what);
  }

  /** Element i of {@code t} is element {@code first + i} of the reduction. */
  private static void assertReduced(Tensor t, long first, DType dtype, ReduceOp op, int[][] hosts, String what) {
    for (long i = 0; i < t.count(); i++) {
      long want = expectedBits(dtype, op, hosts, first + i);
      long got = bits(t, i);
      if (got != want) {
        throw new AssertionError(what + ": element " + (first + i) + " expected bits 0x" + Long.toHexString(want)
            + ", got 0x" + Long.toHexString(got));
      }
    }
  }

  private static IntFunction<String> hostOf(int[][] hosts) {
    return rank -> {
      for (int h = 0; h < hosts.length; h++) {
        for (int r : hosts[h]) {
          if (r == rank) {
            return "host-" + h;
          }
        }
      }
      throw new IllegalArgumentException("rank " + rank);
    };
  }

  @ParameterizedTest(name = "{0}, hosts {1}, {2} elements, {3} {4}")
  @MethodSource("cases")
  void allReduceAndReduceScatterReduceWithinHostsThenAcross(String kernels, int[][] hosts, long count,
      DType dtype, ReduceOp op) {
    runChecked(kernels, hosts, count, dtype, op);
  }

  /** The options of a variant: "native", "java" (the reducers) or "phased" (native, phased AllReduce). */
  private static CpuOptions options(String variant) {
    return variant.equals("phased") ? CpuOptions.defaults().withPhasedAllReduce()
        : CpuOptions.defaults().withKernels(CpuOptions.Kernels.valueOf(variant.toUpperCase(java.util.Locale.ROOT)));
  }

  /** Runs {@link #check} on every rank of {@code hosts}, reducing as {@code variant} says. */
  private static void runChecked(String variant, int[][] hosts, long count, DType dtype, ReduceOp op) {
    int p = hosts.length * hosts[0].length;
    LocalCluster.of(p).timeout(TIMEOUT).strictMemory(true)
        .backend(new ShmThreadsCluster(segments, 64L << 20, hostOf(hosts), options(variant)))
        .run(pg -> check(pg, variant, hosts, count, dtype, op));
  }

  /**
   * The AllReduce that runs: one-shot for small tensors; for large ones fused where the native kernels
   * reduce (a native operator without a post-operation) and no option asks for the phases, phased
   * otherwise — wherever the tensors are (those from elsewhere are copied through the segment).
   */
  private static String allReduceAlgorithm(String variant, long count, DType dtype, ReduceOp op) {
    if (count * dtype.size() <= Algorithms.ONE_SHOT_MAX_BYTES) {
      return "hierarchical-one-shot";
    }
    boolean nativeOperator = op == ReduceOp.SUM || op == ReduceOp.PRODUCT
        || (op == ReduceOp.MAX || op == ReduceOp.MIN) && !dtype.isFloatingPoint() && dtype.isSigned();
    return variant.equals("native") && nativeOperator ? "hierarchical" : "hierarchical-phased";
  }

  private static void check(ProcessGroup pg, String variant, int[][] hosts, long count, DType dtype, ReduceOp op) {
    int r = pg.rank();
    try (Tensor in = pg.empty(count, dtype); Tensor out = pg.empty(count, dtype)) {
      OrderSensitiveData.fill(in, r);
      Work w = pg.allReduceAsync(out, in, op);
      w.waitFor();
      assertThat(w.stats().orElseThrow().algorithm()).isEqualTo(allReduceAlgorithm(variant, count, dtype, op));
      assertReduced(out, dtype, op, hosts, "AllReduce out of place, rank " + r);
      pg.allReduce(in, op);
      assertReduced(in, dtype, op, hosts, "AllReduce in place, rank " + r);
    }
    // Not from the group: outside the shared segments.
    try (Tensor in = Tensor.empty(count, dtype); Tensor out = Tensor.empty(count, dtype)) {
      OrderSensitiveData.fill(in, r);
      Work w = pg.allReduceAsync(out, in, op);
      w.waitFor();
      assertThat(w.stats().orElseThrow().algorithm()).isEqualTo(allReduceAlgorithm(variant, count, dtype, op));
      assertReduced(out, dtype, op, hosts, "AllReduce of tensors from elsewhere, rank " + r);
      pg.allReduce(in, op);
      assertReduced(in, dtype, op, hosts, "AllReduce in place of a tensor from elsewhere, rank " + r);
    }
    int p = pg.size();
    long q = count / p;
    for (boolean fromGroup : new boolean[] {true, false}) {
      try (Tensor in = fromGroup ? pg.empty(q * p, dtype) : Tensor.empty(q * p, dtype);
           Tensor out = fromGroup ? pg.empty(q, dtype) : Tensor.empty(q, dtype)) {
        String where = fromGroup ? "" : " of tensors from elsewhere";
        OrderSensitiveData.fill(in, r);
        Work w = pg.reduceScatterTensorAsync(out, in, op);
        w.waitFor();
        assertThat(w.stats().orElseThrow().algorithm()).isEqualTo("hierarchical");
        assertReduced(out, r * q, dtype, op, hosts, "ReduceScatter" + where + ", rank " + r);
        Tensor mine = in.chunk(p, r);
        pg.reduceScatterTensor(mine, in, op);
        assertReduced(mine, r * q, dtype, op, hosts, "ReduceScatter in place" + where + ", rank " + r);
      }
    }
  }

  /**
   * Three hosts of two ranks: the rails' ring has three ranks, and its order over the hosts differs
   * by block, so the data are integers (exact in any order) — a different, known value for every
   * rank and element.
   */
  @ParameterizedTest(name = "{0}, hosts {1}, {2} {3}")
  @MethodSource("threeHosts")
  void threeHostsReduceAlongTheRailsRing(String kernels, int[][] hosts, DType dtype, ReduceOp op) {
    runChecked(kernels, hosts, 300_007, dtype, op);
  }

  static Stream<Arguments> threeHosts() {
    List<Arguments> out = new ArrayList<>();
    for (String kernels : VARIANTS) {
      for (int[][] hosts : new int[][][] {{{0, 3}, {1, 4}, {2, 5}}, {{0, 1}, {2, 3}, {4, 5}}}) {
        out.add(Arguments.of(kernels, hosts, DType.INT64, ReduceOp.SUM));
        out.add(Arguments.of(kernels, hosts, DType.INT32, ReduceOp.MAX));
      }
    }
    return out.stream();
  }

  /**
   * Ranks of one host whose tensors come from different places — ranks 0 and 1 from the group (in
   * the segments), 2 and 3 from elsewhere — run the same AllReduce and get the documented bits.
   */
  @ParameterizedTest(name = "{0}")
  @org.junit.jupiter.params.provider.ValueSource(strings = {"native", "java", "phased"})
  void hostMatesWithTensorsFromDifferentPlacesRunTheSameAllReduce(String variant) {
    long count = 40_003;
    List<String> algorithms = LocalCluster.of(4).timeout(TIMEOUT).strictMemory(true)
        .backend(new ShmThreadsCluster(segments, 64L << 20, hostOf(INTERLEAVED), options(variant)))
        .call(pg -> {
          boolean fromGroup = pg.rank() < 2;
          try (Tensor in = fromGroup ? pg.empty(count, DType.FLOAT32) : Tensor.empty(count, DType.FLOAT32);
               Tensor out = fromGroup ? pg.empty(count, DType.FLOAT32) : Tensor.empty(count, DType.FLOAT32)) {
            OrderSensitiveData.fill(in, pg.rank());
            Work w = pg.allReduceAsync(out, in, ReduceOp.SUM);
            w.waitFor();
            assertReduced(out, DType.FLOAT32, ReduceOp.SUM, INTERLEAVED, "AllReduce, rank " + pg.rank());
            pg.allReduce(in, ReduceOp.SUM);
            assertReduced(in, DType.FLOAT32, ReduceOp.SUM, INTERLEAVED, "AllReduce in place, rank " + pg.rank());
            return w.stats().orElseThrow().algorithm();
          }
        });
    assertThat(algorithms).containsOnly(allReduceAlgorithm(variant, count, DType.FLOAT32, ReduceOp.SUM));
  }

  static Stream<Arguments> specialValueCases() {
    List<Arguments> out = new ArrayList<>();
    for (int[][] hosts : new int[][][] {INTERLEAVED, CONTIGUOUS, {{0, 3}, {1, 4}, {2, 5}}}) {
      out.add(Arguments.of(hosts, DType.FLOAT32, ReduceOp.SUM));
      out.add(Arguments.of(hosts, DType.FLOAT32, ReduceOp.PRODUCT));
      out.add(Arguments.of(hosts, DType.FLOAT64, ReduceOp.SUM));
    }
    return out.stream();
  }

  /**
   * The fused AllReduce gives the phased one's numbers where the order shows most — quiet NaNs whose
   * payloads differ by rank, infinities of both signs (whose sum is a NaN), signed zeros and
   * subnormals among order-sensitive values — out of place and in place, on two and three hosts; and
   * every rank gets the same bits. The one difference allowed: where both results are NaN, the
   * payload (the ring combines {@code incoming ⊕ partial}, the fused kernel {@code partial ⊕ incoming},
   * and an x86 operation on two NaNs keeps one of them).
   */
  @ParameterizedTest(name = "hosts {0}, {1} {2}")
  @MethodSource("specialValueCases")
  void theFusedAllReduceGivesThePhasedNumbersWithNaNsInfinitiesAndSignedZeros(int[][] hosts, DType dtype,
      ReduceOp op) {
    long count = 100_003;
    List<long[]> fused = specialValuesReduced("native", hosts, count, dtype, op);
    List<long[]> phased = specialValuesReduced("phased", hosts, count, dtype, op);
    long nans = 0;
    for (int r = 0; r < fused.size(); r++) {
      long[] f = fused.get(r);
      long[] ph = phased.get(r);
      for (int i = 0; i < f.length; i++) {
        String where = "rank " + r + ", " + (i < count ? "out of place" : "in place") + ", element " + (i % count);
        if (f[i] != fused.get(0)[i]) {
          throw new AssertionError(where + ": 0x" + Long.toHexString(f[i]) + " but rank 0 got 0x"
              + Long.toHexString(fused.get(0)[i]));
        }
        boolean bothNaN = isNaN(dtype, f[i]) && isNaN(dtype, ph[i]);
        nans += bothNaN ? 1 : 0;
        if (f[i] != ph[i] && !bothNaN) {
          throw new AssertionError(where + ": fused 0x" + Long.toHexString(f[i]) + ", phased 0x" + Long.toHexString(ph[i]));
        }
      }
    }
    assertThat(nans).as("NaN results").isGreaterThan(0);
  }

  private static boolean isNaN(DType dtype, long bits) {
    return dtype == DType.FLOAT32 ? Float.isNaN(Float.intBitsToFloat((int) bits)) : Double.isNaN(Double.longBitsToDouble(bits));
  }

  /** Every rank's results, out of place then in place, of the special values under {@code variant}. */
  private static List<long[]> specialValuesReduced(String variant, int[][] hosts, long count, DType dtype,
      ReduceOp op) {
    int p = hosts.length * hosts[0].length;
    return LocalCluster.of(p).timeout(TIMEOUT).strictMemory(true)
        .backend(new ShmThreadsCluster(segments, 64L << 20, hostOf(hosts), options(variant)))
        .call(pg -> {
          long[] bits = new long[(int) (2 * count)];
          try (Tensor in = pg.empty(count, dtype); Tensor out = pg.empty(count, dtype)) {
            fillSpecial(in, pg.rank());
            Work w = pg.allReduceAsync(out, in, op);
            w.waitFor();
            assertThat(w.stats().orElseThrow().algorithm())
                .isEqualTo(variant.equals("native") ? "hierarchical" : "hierarchical-phased");
            pg.allReduce(in, op);
            for (long i = 0; i < count; i++) {
              bits[(int) i] = bits(out, i);
              bits[(int) (count + i)] = bits(in, i);
            }
          }
          return bits;
        });
  }

  /** Order-sensitive values with a NaN, an infinity, a signed zero or a subnormal at every other element. */
  private static void fillSpecial(Tensor t, int r) {
    boolean f32 = t.dtype() == DType.FLOAT32;
    for (long i = 0; i < t.count(); i++) {
      long a = t.address() + i * t.dtype().size();
      double v;
      switch ((int) (i % 8)) {
        case 0:
          if (f32) {
            NativeMemory.putInt(a, 0x7fc00000 | (r + 1) << 16 | (int) (i % 65_536));
          } else {
            NativeMemory.putLong(a, 0x7ff8000000000000L | (long) (r + 1) << 40 | i);
          }
          continue;
        case 2: v = (r + i) % 2 == 0 ? Double.POSITIVE_INFINITY : Double.NEGATIVE_INFINITY; break;
        case 4: v = (r + i / 8) % 2 == 0 ? -0.0 : 0.0; break;
        case 6: v = (f32 ? Float.MIN_VALUE : Double.MIN_VALUE) * ((r + 1) * (i % 1000 + 1)); break;
        default: v = OrderSensitiveData.value(t.dtype(), r, i); break;
      }
      if (f32) {
        NativeMemory.putInt(a, Float.floatToRawIntBits((float) v));
      } else {
        NativeMemory.putLong(a, Double.doubleToRawLongBits(v));
      }
    }
  }

  /** Hosts of 2 and 1 ranks: the hierarchical algorithms need even hosts, so the group runs the ring over TCP. */
  @ParameterizedTest(name = "{0} elements")
  @org.junit.jupiter.params.provider.ValueSource(longs = {1001, 40_003})
  void unevenHostsRunTheRingOverTcpExactly(long count) {
    int[][] hosts = {{0, 1}, {2}};
    List<String> algorithms = LocalCluster.of(3).timeout(TIMEOUT).strictMemory(true)
        .backend(new ShmThreadsCluster(segments, 64L << 20, hostOf(hosts), CpuOptions.fromEnvironment()))
        .call(pg -> {
          try (Tensor t = pg.empty(count, DType.INT64)) {
            OrderSensitiveData.fill(t, pg.rank());
            Work w = pg.allReduceAsync(t, ReduceOp.SUM);
            w.waitFor();
            assertReduced(t, DType.INT64, ReduceOp.SUM, hosts, "AllReduce on uneven hosts, rank " + pg.rank());
            return w.stats().orElseThrow().algorithm();
          }
        });
    assertThat(algorithms).containsOnly("ring");
  }
}
