package io.nccl4j.conformance;

import static org.assertj.core.api.Assertions.assertThat;

import io.nccl4j.DType;
import io.nccl4j.LocalCluster;
import io.nccl4j.cpu.CpuCluster;
import io.nccl4j.cpu.CpuOptions;
import io.nccl4j.testing.GlooCaseFile;
import io.nccl4j.testing.GlooCaseFile.Case;
import io.nccl4j.testing.GlooCaseFile.Result;
import io.nccl4j.testing.LibtorchOracle;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * libtorch 2.10's ProcessGroupGloo as the oracle of the CPU backend's results: the same cases ({@link GlooCases}:
 * every collective, dtype, operator gloo and nccl4j share, counts 1, 7 and 1000, world sizes 3 and 4) on the same
 * input bytes, once by gloo's ranks as threads in the oracle's JVM ({@link LibtorchOracle}), once by nccl4j's as
 * threads here ({@link GlooCaseRun}), under each of the CPU backend's algorithm and reducer choices; every output element that PyTorch
 * defines must be the same bits on both sides (GlooCases says why that is a fair demand of floating results). Where
 * the build did not copy the oracle's jars, it skips, saying how to get them.
 */
@Tag("multirank")
@Tag("multiprocess")
@Tag("conformance")
class GlooOracleTest {
  private static final List<Case> CASES = GlooCases.all();

  @TempDir
  static Path dir;

  /** Gloo's outcome, by case, then by rank: run once, by the first test that asks. */
  private static List<List<Result>> glooResults;

  /**
   * Gloo's results, from the oracle's one run. Not in a {@code @BeforeAll}: where the oracle's jars are missing, each
   * test then reports itself skipped with the reason, instead of the class running no test at all.
   */
  private static synchronized List<List<Result>> gloo() throws Exception {
    if (glooResults == null) {
      Path cases = dir.resolve("cases.bin");
      Path results = dir.resolve("results.bin");
      GlooCaseFile.writeCases(cases, CASES);
      try (LibtorchOracle oracle = LibtorchOracle.start(dir, 150, "gloo", cases.toString(), results.toString())) {
        oracle.awaitSuccess(160);
      }
      glooResults = GlooCaseFile.readResults(results);
    }
    return glooResults;
  }

  static Stream<Arguments> backends() {
    return Stream.of(
        Arguments.of("shared-memory windows, native reducers", CpuOptions.defaults()),
        Arguments.of("shared-memory windows, Java reducers", CpuOptions.defaults().withKernels(
            CpuOptions.Kernels.JAVA)),
        Arguments.of("ring", CpuOptions.defaults().withAlgorithms(CpuOptions.Algorithms.RING)));
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("backends")
  void theCpuBackendComputesWhatGlooComputesBitForBit(String name, CpuOptions options) throws Exception {
    List<List<Result>> gloo = gloo();
    assertThat(gloo).as("gloo's results, one per case").hasSize(CASES.size());
    List<String> refused = new ArrayList<>();
    for (int c = 0; c < CASES.size(); c++) {
      for (int r = 0; r < gloo.get(c).size(); r++) {
        if (!gloo.get(c).get(r).ok()) {
          refused.add(CASES.get(c).name() + ", rank " + r + ": " + gloo.get(c).get(r).status());
        }
      }
    }
    assertThat(refused).as("cases gloo refused; every case of GlooCases must be one gloo runs").isEmpty();

    List<List<byte[]>> ours = nccl4jOutputs(options);
    List<String> differences = new ArrayList<>();
    long elements = 0;
    for (int c = 0; c < CASES.size(); c++) {
      Case k = CASES.get(c);
      DType t = DType.parse(k.dtype());
      for (int r : definedRanks(k)) {
        byte[] theirs = gloo.get(c).get(r).output();
        byte[] mine = ours.get(c).get(r);
        long expected = (long) outputElements(k, r) * t.size();
        assertThat(theirs.length).as("%s, rank %d: gloo's output bytes", k.name(), r).isEqualTo(expected);
        assertThat(mine.length).as("%s, rank %d: nccl4j's output bytes", k.name(), r).isEqualTo(expected);
        String d = difference(t, theirs, mine);
        if (!d.isEmpty()) {
          differences.add(k.name() + ", rank " + r + ": " + d);
        }
        elements += outputElements(k, r);
      }
    }
    System.out.println("GlooOracleTest (" + name + "): " + CASES.size() + " cases, " + elements
        + " output elements compared with gloo's");
    assertThat(differences).as("%d outputs (a case on a rank) of the %d cases differ from gloo's results (%s)",
        differences.size(), CASES.size(), name).isEmpty();
  }

  /** nccl4j's outputs of every case ({@link GlooCaseRun}), by case, then by rank: one cluster per world size. */
  private static List<List<byte[]>> nccl4jOutputs(CpuOptions options) {
    List<List<byte[]>> ours = new ArrayList<>(CASES.size());
    CASES.forEach(c -> ours.add(null));
    for (int size : GlooCases.WORLD_SIZES) {
      List<List<byte[]>> byRank = LocalCluster.of(size).backend(CpuCluster.of(options)).timeout(Duration.ofSeconds(60))
          .call(pg -> {
            List<byte[]> outputs = new ArrayList<>();
            for (Case c : CASES) {
              outputs.add(c.worldSize() == size ? GlooCaseRun.run(pg, c) : null);
            }
            return outputs;
          });
      for (int c = 0; c < CASES.size(); c++) {
        if (CASES.get(c).worldSize() == size) {
          List<byte[]> ranks = new ArrayList<>();
          for (int r = 0; r < size; r++) {
            ranks.add(byRank.get(r).get(c));
          }
          ours.set(c, ranks);
        }
      }
    }
    return ours;
  }

  /**
   * The premises of the comparison, checked on gloo's results: a floating SUM, AVG or PRODUCT is the exact result,
   * which the dtype holds without rounding (so no order of combination could have changed it), and a wrap-around
   * case does wrap.
   */
  @Test
  void theCasesMeanWhatGlooCasesSays() throws Exception {
    List<List<Result>> gloo = gloo();
    int exact = 0;
    int wrapping = 0;
    for (int c = 0; c < CASES.size(); c++) {
      Case k = CASES.get(c);
      DType t = DType.parse(k.dtype());
      if (!k.collective().equals("all_reduce") || !gloo.get(c).get(0).ok()) {
        continue;
      }
      byte[] out = gloo.get(c).get(0).output();
      for (int i = 0; i < k.count(); i++) {
        if (t.isFloatingPoint() && !k.op().equals("min") && !k.op().equals("max")) {
          double v = k.op().equals("product") ? 1 : 0;
          for (byte[] in : k.inputs()) {
            double x = t.bitsToDouble(bits(t, in, i));
            v = k.op().equals("product") ? v * x : v + x;
          }
          v = k.op().equals("avg") ? v / k.worldSize() : v;
          assertThat(t.round(v)).as("%s, element %d: the exact result is a %s", k.name(), i, t).isEqualTo(v);
          assertThat(bits(t, out, i)).as("%s, element %d: gloo's result is the exact %s", k.name(), i, v)
              .isEqualTo(t.doubleToBits(v) & mask(t));
          exact++;
        }
        if (k.name().endsWith("wrapping around")) {
          long v = k.op().equals("product") ? 1 : 0;
          for (byte[] in : k.inputs()) {
            long x = t.bitsToLong(bits(t, in, i));
            v = k.op().equals("product") ? v * x : v + x;
          }
          wrapping += v < t.minValue() || v > t.maxValue() ? 1 : 0;
        }
      }
    }
    assertThat(exact).as("floating sums, averages and products checked").isGreaterThan(0);
    assertThat(wrapping).as("elements of the wrap-around cases whose exact result is outside the dtype")
        .isGreaterThan(4 * 1000 * GlooCases.WORLD_SIZES.length / 2);
  }

  private static long mask(DType t) {
    return t.size() == 8 ? -1L : (1L << (8 * t.size())) - 1;
  }

  /** Element {@code i}'s raw bits, in the low bytes. */
  private static long bits(DType t, byte[] b, int i) {
    ByteBuffer buf = ByteBuffer.wrap(b).order(ByteOrder.nativeOrder());
    switch (t.size()) {
      case 1: return buf.get(i) & 0xffL;
      case 2: return buf.getShort(i * 2) & 0xffffL;
      case 4: return buf.getInt(i * 4) & 0xffffffffL;
      default: return buf.getLong(i * 8);
    }
  }

  /** The ranks whose output PyTorch defines: the root's of reduce and gather (gloo leaves partial sums elsewhere). */
  private static int[] definedRanks(Case c) {
    if (c.collective().equals("reduce") || c.collective().equals("gather")) {
      return new int[] {c.root()};
    }
    int[] all = new int[c.worldSize()];
    Arrays.setAll(all, i -> i);
    return all;
  }

  private static int outputElements(Case c, int rank) {
    switch (c.collective()) {
      case "all_gather_into_tensor":
      case "all_to_all_single":
        return c.worldSize() * c.count();
      case "gather":
        return rank == c.root() ? c.worldSize() * c.count() : 0;
      default:
        return c.count();
    }
  }

  /** Empty when equal; else how many elements differ and the first, both values. */
  private static String difference(DType t, byte[] theirs, byte[] mine) {
    int size = t.size();
    int wrong = 0;
    int first = -1;
    for (int i = 0; i < theirs.length / size; i++) {
      if (!Arrays.equals(theirs, i * size, (i + 1) * size, mine, i * size, (i + 1) * size)) {
        first = first < 0 ? i : first;
        wrong++;
      }
    }
    if (wrong == 0) {
      return "";
    }
    return wrong + " of " + theirs.length / size + " elements differ, first at index " + first + ": gloo "
        + value(t, theirs, first) + ", nccl4j " + value(t, mine, first);
  }

  private static String value(DType t, byte[] b, int i) {
    long bits = bits(t, b, i);
    String v = t.isFloatingPoint() ? String.valueOf(t.bitsToDouble(bits)) : String.valueOf(t.bitsToLong(bits));
    return v + " (0x" + Long.toHexString(bits) + ")";
  }
}
