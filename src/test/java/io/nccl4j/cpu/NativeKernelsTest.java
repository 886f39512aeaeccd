package io.nccl4j.cpu;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.fail;

import io.nccl4j.internal.bind.cpu.CpuKernels;
import io.nccl4j.memory.NativeMemory;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.EnumSource;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * The native reduction kernels against the Java reducers, bit for bit. The data is order-sensitive
 * (floating-point values of mixed magnitude, integers that overflow), so a kernel that combined
 * the sources in any other order than x0 ⊕ x1 ⊕ … would differ; special values (NaN, ±∞, −0.0,
 * subnormals) check that no fast-math or flush-to-zero crept in. Every destination is framed by
 * guard elements that must stay untouched.
 */
@Tag("unit")
class NativeKernelsTest {
  private static final int MAX_N = 1000;
  private static final long GUARD = 0x5A5A5A5A5A5A5A5AL;
  private final List<Long> allocations = new ArrayList<>();

  @BeforeAll
  static void requireTheLibrary() {
    if (NativeKernels.available()) {
      return;
    }
    String why = NativeKernels.unavailableReason();
    if (Boolean.getBoolean("nccl4j.javacpp.skip")) {
      System.out.println("NativeKernelsTest skipped: the build skipped the JNI libraries (-Djavacpp.skip=true): " + why);
      Assumptions.abort(why);
    }
    fail("the CPU kernel library should have been built by this build (javacpp.skip is false): " + why);
  }

  @AfterEach
  void free() {
    allocations.forEach(NativeMemory::free);
    allocations.clear();
  }

  private long allocate(long bytes) {
    long a = NativeMemory.allocate(bytes);
    allocations.add(a);
    return a;
  }

  private static int size(Reduction.ArrayOp op) {
    return op.name().startsWith("F32") || op.name().startsWith("I32") ? 4 : 8;
  }

  /** Element i of source k: order-sensitive values, with specials at fixed places. */
  private static void fill(Reduction.ArrayOp op, long address, int k, int n, Random rnd) {
    for (int i = 0; i < n; i++) {
      long a = address + (long) i * size(op);
      switch (op) {
        case F32_SUM: case F32_PROD:
          NativeMemory.putFloat(a, (float) special(i, k, rnd, true));
          break;
        case F64_SUM: case F64_PROD:
          NativeMemory.putDouble(a, special(i, k, rnd, false));
          break;
        case I32_SUM: case I32_PROD: case I32_MIN: case I32_MAX:
          NativeMemory.putInt(a, rnd.nextInt());
          break;
        default:
          NativeMemory.putLong(a, rnd.nextLong());
      }
    }
  }

  private static double special(int i, int k, Random rnd, boolean single) {
    switch (i) {
      case 3: return k == 1 ? Double.NaN : 1.5;
      case 5: return k == 0 ? Double.POSITIVE_INFINITY : k == 2 ? Double.NEGATIVE_INFINITY : 2.0;
      case 7: return -0.0;
      case 9: return single ? Float.MIN_VALUE : Double.MIN_VALUE;
      case 11: return single ? Float.MAX_VALUE : Double.MAX_VALUE;
      default:
        return (rnd.nextDouble() - 0.5) * Math.pow(10, rnd.nextInt(13) - 6);
    }
  }

  private static boolean sameBits(Reduction.ArrayOp op, long a, long b) {
    switch (op) {
      case F32_SUM: case F32_PROD: {
        float x = NativeMemory.getFloat(a);
        float y = NativeMemory.getFloat(b);
        return Float.isNaN(x) && Float.isNaN(y) || Float.floatToRawIntBits(x) == Float.floatToRawIntBits(y);
      }
      case F64_SUM: case F64_PROD: {
        double x = NativeMemory.getDouble(a);
        double y = NativeMemory.getDouble(b);
        return Double.isNaN(x) && Double.isNaN(y) || Double.doubleToRawLongBits(x) == Double.doubleToRawLongBits(y);
      }
      case I32_SUM: case I32_PROD: case I32_MIN: case I32_MAX:
        return NativeMemory.getInt(a) == NativeMemory.getInt(b);
      default:
        return NativeMemory.getLong(a) == NativeMemory.getLong(b);
    }
  }

  static Stream<Arguments> shapes() {
    List<Arguments> out = new ArrayList<>();
    for (Reduction.ArrayOp op : Reduction.ArrayOp.values()) {
      for (int sources : new int[] {1, 2, 3, 4, 7}) {
        for (int n : new int[] {0, 1, 15, 16, 17, 33, MAX_N}) {
          out.add(Arguments.of(op, sources, n));
        }
      }
    }
    return out.stream();
  }

  @ParameterizedTest(name = "{0}, {1} sources, {2} elements")
  @MethodSource("shapes")
  void matchesTheJavaReducerBitForBitInEveryDestination(Reduction.ArrayOp op, int ns, int n) {
    int es = size(op);
    Random rnd = new Random(31L * op.ordinal() + 7L * ns + n);
    long[] src = new long[ns];
    for (int k = 0; k < ns; k++) {
      // One element off any 16-byte boundary: the kernel must not assume alignment.
      src[k] = allocate((long) (n + 1) * es) + es;
      fill(op, src[k], k, n, rnd);
    }
    long expected = allocate(Math.max(es, (long) n * es));
    new ArrayReducer((long) MAX_N * 8).reduce(op, src, ns, expected, n);

    int nd = 3;
    long[] dst = new long[nd];
    for (int d = 0; d < nd; d++) {
      long frame = allocate((long) (n + 2) * 8);
      for (int i = 0; i < n + 2; i++) {
        NativeMemory.putLong(frame + i * 8L, GUARD);
      }
      dst[d] = frame + 8;
    }
    try (NativeKernels k = NativeKernels.create(KernelChoice.NATIVE, 8)) {
      k.reduce(op, src, ns, dst, nd, n);
    }
    for (int d = 0; d < nd; d++) {
      for (int i = 0; i < n; i++) {
        if (!sameBits(op, dst[d] + (long) i * es, expected + (long) i * es)) {
          fail(op + " destination " + d + " element " + i + " of " + n + " with " + ns + " sources differs from the Java reducer");
        }
      }
      assertThat(NativeMemory.getLong(dst[d] - 8)).as("guard before destination %d", d).isEqualTo(GUARD);
      long end = dst[d] + (long) n * es;
      for (long a = end; a < dst[d] + (long) (n + 1) * 8; a += 4) {
        assertThat(NativeMemory.getInt(a)).as("guard after destination %d", d).isEqualTo((int) GUARD);
      }
    }
  }

  @ParameterizedTest
  @EnumSource(Reduction.ArrayOp.class)
  void reducesInPlaceWhenDestinationsAreTheSources(Reduction.ArrayOp op) {
    int es = size(op);
    int ns = 4;
    int n = 517;
    Random rnd = new Random(op.ordinal());
    long[] src = new long[ns];
    long[] copy = new long[ns];
    for (int k = 0; k < ns; k++) {
      src[k] = allocate((long) n * es);
      fill(op, src[k], k, n, rnd);
      copy[k] = allocate((long) n * es);
      NativeMemory.copy(src[k], copy[k], (long) n * es);
    }
    long expected = allocate((long) n * es);
    new ArrayReducer((long) MAX_N * 8).reduce(op, copy, ns, expected, n);
    try (NativeKernels k = NativeKernels.create(KernelChoice.NATIVE, ns)) {
      // AllReduce in place: every output is its input.
      k.reduce(op, src, ns, src.clone(), ns, n);
    }
    for (int d = 0; d < ns; d++) {
      for (int i = 0; i < n; i++) {
        assertThat(sameBits(op, src[d] + (long) i * es, expected + (long) i * es))
            .as("%s in place, buffer %d element %d", op, d, i).isTrue();
      }
    }
    // ReduceScatter in place on rank 2: the one output is source 2 itself.
    long[] again = new long[ns];
    for (int k = 0; k < ns; k++) {
      again[k] = allocate((long) n * es);
      NativeMemory.copy(copy[k], again[k], (long) n * es);
    }
    try (NativeKernels k = NativeKernels.create(KernelChoice.NATIVE, ns)) {
      k.reduce(op, again, ns, new long[] {again[2]}, 1, n);
    }
    for (int i = 0; i < n; i++) {
      assertThat(sameBits(op, again[2] + (long) i * es, expected + (long) i * es))
          .as("%s in place into source 2, element %d", op, i).isTrue();
    }
    assertThat(NativeMemory.getLong(again[0])).as("other sources are only read").isEqualTo(NativeMemory.getLong(copy[0]));
  }

  @Test
  void theLibraryRefusesWhatItCannotDoAndTouchesNothing() {
    long table = allocate(16);
    long value = allocate(8);
    long out = allocate(8);
    NativeMemory.putLong(value, 42);
    NativeMemory.putLong(out, GUARD);
    NativeMemory.putLong(table, value);
    NativeMemory.putLong(table + 8, out);
    assertThat(CpuKernels.nccl4j_reduce(Reduction.ArrayOp.values().length, table, 1, table + 8, 1, 1, 1)).isEqualTo(-1);
    assertThat(CpuKernels.nccl4j_reduce(-1, table, 1, table + 8, 1, 1, 1)).isEqualTo(-1);
    assertThat(CpuKernels.nccl4j_reduce(Reduction.ArrayOp.I64_SUM.ordinal(), table, 0, table + 8, 1, 1, 1)).isEqualTo(-1);
    assertThat(NativeMemory.getLong(out)).isEqualTo(GUARD);
    assertThat(CpuKernels.nccl4j_reduce(Reduction.ArrayOp.I64_SUM.ordinal(), table, 1, table + 8, 1, 1, 1)).isZero();
    assertThat(NativeMemory.getLong(out)).isEqualTo(42);
    assertThat(CpuKernels.nccl4j_cpu_kernels_isa()).isIn("avx2", "baseline");
  }

  @Test
  void anInstanceChecksItsCapacityAndClosesOnce() {
    long a = allocate(8);
    NativeKernels k = NativeKernels.create(KernelChoice.NATIVE, 2);
    assertThatThrownBy(() -> k.reduce(Reduction.ArrayOp.I64_SUM, new long[] {a, a, a}, 3, new long[] {a}, 1, 1))
        .isInstanceOf(IllegalStateException.class)
        .hasMessageContaining("expected at most 2 sources and destinations").hasMessageContaining("got 3 and 1");
    k.close();
    k.close();
    assertThatThrownBy(() -> k.reduce(Reduction.ArrayOp.I64_SUM, new long[] {a}, 1, new long[] {a}, 1, 1))
        .isInstanceOf(IllegalStateException.class).hasMessageContaining("after close");
  }

  @Test
  void theJavaChoiceMeansNoKernelsAndABadChoiceIsNamed() {
    assertThat(NativeKernels.create(KernelChoice.JAVA, 4)).isNull();
    assertThat(NativeKernels.describe(KernelChoice.JAVA)).startsWith("java");
    assertThat(NativeKernels.describe(KernelChoice.NATIVE)).startsWith("native (")
        .contains("streaming stores from 4 MiB");
    assertThat(NativeKernels.describe(KernelChoice.CACHED)).startsWith("native (")
        .endsWith("normal stores: NCCL4J_CPU_KERNELS=cached)");
    System.setProperty("nccl4j.cpu.kernels", "gpu");
    try {
      assertThatThrownBy(() -> CpuOptions.fromEnvironment()).isInstanceOf(IllegalArgumentException.class)
          .hasMessage("NCCL4J_CPU_KERNELS / nccl4j.cpu.kernels must be native or cached or java, got 'gpu'");
      System.setProperty("nccl4j.cpu.kernels", " Java ");
      assertThat(CpuOptions.fromEnvironment().kernels()).isEqualTo(CpuOptions.Kernels.JAVA);
    } finally {
      System.clearProperty("nccl4j.cpu.kernels");
    }
  }

  // ------------------------------------------------------------------ streaming stores

  /** Elements of one destination just past the streaming threshold, with a tail shorter than a block. */
  private static int streamedElements(int es) {
    return (int) (NativeKernels.streamMinBytes() / es) + 37;
  }

  /** {@code n} elements of {@code es} bytes framed by guards; the destination starts {@code skew} bytes past 16. */
  private long framedDestination(int n, int es, int skew) {
    long frame = allocate((long) n * es + 64);
    long start = (frame + 15) / 16 * 16 + 16 + skew;
    for (long a = frame; a + 8 <= frame + (long) n * es + 64; a += 8) {
      NativeMemory.putLong(a, GUARD);
    }
    return start;
  }

  /** {@code ns} sources of {@code n} test values each, one element past an aligned start. */
  private long[] shiftedSources(Reduction.ArrayOp op, int ns, int n, long seed) {
    int es = size(op);
    Random rnd = new Random(seed);
    long[] src = new long[ns];
    for (int k = 0; k < ns; k++) {
      src[k] = allocate((long) (n + 1) * es) + es;
      fill(op, src[k], k, n, rnd);
    }
    return src;
  }

  /** What the Java reducer makes of {@code src}, in memory of this test's. */
  private long javaReduced(Reduction.ArrayOp op, long[] src, int ns, int n) {
    long expected = allocate((long) n * size(op));
    new ArrayReducer((long) n * size(op)).reduce(op, src, ns, expected, n);
    return expected;
  }

  private static void assertGuarded(long dst, int n, int es, String what) {
    for (long a = dst - 8; a < dst; a += 4) {
      assertThat(NativeMemory.getInt(a)).as("guard before %s", what).isEqualTo((int) GUARD);
    }
    for (long a = dst + (long) n * es; a < dst + (long) n * es + 8; a += 4) {
      assertThat(NativeMemory.getInt(a)).as("guard after %s", what).isEqualTo((int) GUARD);
    }
  }

  private static void assertSame(Reduction.ArrayOp op, long dst, long expected, int n, String what) {
    int es = size(op);
    for (int i = 0; i < n; i++) {
      if (!sameBits(op, dst + (long) i * es, expected + (long) i * es)) {
        fail(op + " " + what + " element " + i + " of " + n + " differs from the Java reducer");
      }
    }
  }

  @ParameterizedTest
  @EnumSource(Reduction.ArrayOp.class)
  void streamsLargeDestinationsThatOverlapNoSourceBitForBitFromAnAlignedStartOn(Reduction.ArrayOp op) {
    Assumptions.assumeTrue(NativeKernels.streamMinBytes() > 0, "this CPU has no streaming stores");
    int es = size(op);
    int n = streamedElements(es);
    int ns = 3;
    long[] src = shiftedSources(op, ns, n, 131L * op.ordinal());
    long expected = javaReduced(op, src, ns, n);
    // One element past a 16-byte boundary: a head stored normally, then aligned blocks, then a tail.
    long[] dst = {framedDestination(n, es, es)};
    try (NativeKernels k = NativeKernels.create(KernelChoice.NATIVE, 4)) {
      assertThat(k.reduce(op, src, ns, dst, 1, n)).as("%s streamed", op).isTrue();
    }
    assertSame(op, dst[0], expected, n, "streamed destination");
    assertGuarded(dst[0], n, es, "streamed destination");
  }

  /** What must not stream does not, and gives the same bits: several destinations, in place, small, or CACHED. */
  @Test
  void storesNormallyInPlaceBelowTheThresholdAcrossSkewsAndWhenCached() {
    Assumptions.assumeTrue(NativeKernels.streamMinBytes() > 0, "this CPU has no streaming stores");
    Reduction.ArrayOp op = Reduction.ArrayOp.F32_SUM;
    int es = 4;
    int n = streamedElements(es);
    Random rnd = new Random(5);
    long[] src = {allocate((long) n * es), allocate((long) n * es)};
    fill(op, src[0], 0, n, rnd);
    fill(op, src[1], 1, n, rnd);
    long expected = allocate((long) n * es);
    new ArrayReducer((long) n * es).reduce(op, src, 2, expected, n);
    try (NativeKernels k = NativeKernels.create(KernelChoice.NATIVE, 4);
        NativeKernels cached = NativeKernels.create(KernelChoice.CACHED, 4)) {
      long[] several = {framedDestination(n, es, 0), framedDestination(n, es, 0)};
      assertThat(k.reduce(op, src, 2, several, 2, n)).as("two destinations").isFalse();
      assertSame(op, several[0], expected, n, "first of two destinations");
      assertSame(op, several[1], expected, n, "second of two destinations");
      long[] skewed = {framedDestination(n, es, 2)};
      assertThat(k.reduce(op, src, 2, skewed, 1, n)).as("a destination off the elements' alignment").isFalse();
      assertSame(op, skewed[0], expected, n, "a destination off the elements' alignment");
      long[] one = {framedDestination(n, es, 0)};
      assertThat(cached.reduce(op, src, 2, one, 1, n)).as("CACHED").isFalse();
      assertSame(op, one[0], expected, n, "CACHED");
      long[] small = {framedDestination(n, es, 0)};
      assertThat(k.reduce(op, src, 2, small, 1, n - 64)).as("below the threshold").isFalse();
      assertSame(op, small[0], expected, n - 64, "below the threshold");
      assertThat(k.reduce(op, src, 2, new long[] {src[1]}, 1, n)).as("in place").isFalse();
      assertSame(op, src[1], expected, n, "in place");
    }
  }

  /**
   * Pieces (the hierarchical AllReduce's): one or two destinations of any size stream, bit for bit
   * with the Java reducer and with the guards intact — a piece of 1 000 elements starting one element
   * past a 16-byte boundary; a copy of one source to two; three destinations, an overlapping one and
   * CACHED kernels store normally, with the same bits.
   */
  @ParameterizedTest
  @EnumSource(Reduction.ArrayOp.class)
  void piecesStreamToUpToTwoDestinationsWhateverTheirSizeBitForBit(Reduction.ArrayOp op) {
    Assumptions.assumeTrue(NativeKernels.streamMinBytes() > 0, "this CPU has no streaming stores");
    int es = size(op);
    int n = MAX_N;
    int ns = 3;
    long[] src = shiftedSources(op, ns, n, 977L * op.ordinal());
    long expected = javaReduced(op, src, ns, n);
    try (NativeKernels k = NativeKernels.create(KernelChoice.NATIVE, 4);
        NativeKernels cached = NativeKernels.create(KernelChoice.CACHED, 4)) {
      long[] two = {framedDestination(n, es, es), framedDestination(n, es, es)};
      assertThat(k.reducePiece(op, src, ns, two, 2, n)).as("%s, two destinations", op).isTrue();
      for (int d = 0; d < 2; d++) {
        assertSame(op, two[d], expected, n, "piece destination " + d);
        assertGuarded(two[d], n, es, "piece destination " + d);
      }
      long[] copies = {framedDestination(n, es, es), framedDestination(n, es, es)};
      assertThat(k.reducePiece(op, new long[] {src[0]}, 1, copies, 2, n)).as("%s, a copy to two", op).isTrue();
      for (int d = 0; d < 2; d++) {
        assertSame(op, copies[d], src[0], n, "copy " + d);
        assertGuarded(copies[d], n, es, "copy " + d);
      }
      long[] three = {framedDestination(n, es, es), framedDestination(n, es, es), framedDestination(n, es, es)};
      assertThat(k.reducePiece(op, src, ns, three, 3, n)).as("%s, three destinations", op).isFalse();
      for (int d = 0; d < 3; d++) {
        assertSame(op, three[d], expected, n, "destination " + d + " of three");
      }
      long[] cachedTwo = {framedDestination(n, es, es), framedDestination(n, es, es)};
      assertThat(cached.reducePiece(op, src, ns, cachedTwo, 2, n)).as("%s, CACHED", op).isFalse();
      assertSame(op, cachedTwo[1], expected, n, "CACHED piece");
      long inPlace = allocate((long) n * es);
      NativeMemory.copy(src[2], inPlace, (long) n * es);
      long[] sources = {src[0], src[1], inPlace};
      assertThat(k.reducePiece(op, sources, ns, new long[] {inPlace, two[0]}, 2, n)).as("%s, in place", op).isFalse();
      assertSame(op, inPlace, expected, n, "in place piece");
    }
  }

  @Test
  void copiesStreamPastTheThresholdAndOverlappingOnesMoveAsMemmove() {
    Assumptions.assumeTrue(NativeKernels.streamMinBytes() > 0, "this CPU has no streaming stores");
    int bytes = (int) NativeKernels.streamMinBytes() + 45;
    long src = allocate(bytes + 16) + 3;
    for (int i = 0; i < bytes; i++) {
      NativeMemory.putByte(src + i, (byte) (i * 31 + (i >>> 11)));
    }
    try (NativeKernels k = NativeKernels.create(KernelChoice.NATIVE, 2);
        NativeKernels cached = NativeKernels.create(KernelChoice.CACHED, 2)) {
      long dst = framedDestination(bytes, 1, 5);
      assertThat(NativeKernels.copy(k, src, dst, bytes)).as("streamed").isTrue();
      assertCopied(src, dst, bytes, 0, "streamed");
      assertGuarded(dst, bytes, 1, "streamed copy");
      long normal = framedDestination(bytes, 1, 5);
      assertThat(NativeKernels.copy(cached, src, normal, bytes)).as("CACHED").isFalse();
      assertCopied(src, normal, bytes, 0, "CACHED");
      assertThat(NativeKernels.copy(null, src, normal, bytes)).as("Java").isFalse();
      // Overlapping: forward by 4 KiB within one buffer, as memmove.
      long both = allocate(bytes + 4096L);
      NativeMemory.copy(src, both, bytes);
      assertThat(NativeKernels.copy(k, both, both + 4096, bytes)).as("overlapping").isFalse();
      assertCopied(src, both + 4096, bytes, 0, "overlapping");
    }
  }

  private static void assertCopied(long src, long dst, int bytes, int from, String what) {
    for (int i = from; i < bytes; i++) {
      if (NativeMemory.getByte(src + i) != NativeMemory.getByte(dst + i)) {
        fail(what + " copy differs at byte " + i + " of " + bytes);
      }
    }
  }
}
