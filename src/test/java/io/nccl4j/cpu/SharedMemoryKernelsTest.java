package io.nccl4j.cpu;

import static org.assertj.core.api.Assertions.assertThat;

import io.nccl4j.DType;
import io.nccl4j.LocalCluster;
import io.nccl4j.ProcessGroup;
import io.nccl4j.ReduceOp;
import io.nccl4j.Tensor;
import io.nccl4j.Work;
import io.nccl4j.testing.TestTime;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.stream.Stream;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * The shared-memory AllReduce, ReduceScatter and Reduce (ranks as threads) with the native kernels and
 * with the Java reducers, against an oracle that folds the ranks' values in rank order with Java's
 * operators. The floating-point data is order-sensitive (mixed magnitudes, unlike the conformance
 * suite's exact data), so both paths must reduce in exactly NCCL's documented order to pass, and
 * must therefore agree bit for bit. Operators without a kernel (integer AVG, floating MIN) check
 * that the native choice falls back to Java for them.
 */
@Tag("unit")
class SharedMemoryKernelsTest {
  private static final Duration TIMEOUT = TestTime.seconds(60);

  static Stream<Arguments> cases() {
    List<Arguments> out = new ArrayList<>();
    for (String kernels : new String[] {"native", "java"}) {
      for (int p : new int[] {2, 3, 4}) {
        // 1 001 elements: one-shot; 40 003: direct, blocks of unequal length.
        for (long count : new long[] {1001, 40_003}) {
          for (Object[] op : OrderSensitiveData.OPERATORS) {
            out.add(Arguments.of(kernels, p, count, op[0], op[1]));
          }
        }
      }
    }
    return out.stream();
  }

  @ParameterizedTest(name = "{0} kernels, {1} ranks, {2} elements, {3} {4}")
  @MethodSource("cases")
  void reducesInRankOrderOutOfPlaceAndInPlace(String kernels, int p, long count, DType dtype, ReduceOp op) {
    CpuOptions options = CpuOptions.defaults().withKernels(CpuOptions.Kernels.valueOf(kernels.toUpperCase(Locale.ROOT)));
    LocalCluster.of(p).timeout(TIMEOUT).strictMemory(true).backend(CpuCluster.of(options))
        .run(pg -> check(pg, p, count, dtype, op));
  }

  private static void check(ProcessGroup pg, int p, long count, DType dtype, ReduceOp op) {
    int r = pg.rank();
    int[] ranks = OrderSensitiveData.rankOrder(p);
    java.util.function.LongFunction<int[]> order = i -> ranks;
    String algorithm = count * dtype.size() <= Algorithms.ONE_SHOT_MAX_BYTES ? "one-shot" : "direct";
    try (Tensor in = pg.empty(count, dtype); Tensor out = pg.empty(count, dtype)) {
      OrderSensitiveData.fill(in, r);
      Work w = pg.allReduceAsync(out, in, op);
      w.waitFor();
      assertThat(w.stats().orElseThrow().algorithm()).isEqualTo(algorithm);
      OrderSensitiveData.assertReduced(out, 0, op, order, "AllReduce out of place, rank " + r);
      pg.allReduce(in, op);
      OrderSensitiveData.assertReduced(in, 0, op, order, "AllReduce in place, rank " + r);
    }
    long q = count / p;
    try (Tensor in = pg.empty(q * p, dtype); Tensor out = pg.empty(q, dtype)) {
      OrderSensitiveData.fill(in, r);
      Work w = pg.reduceScatterTensorAsync(out, in, op);
      w.waitFor();
      OrderSensitiveData.assertReduced(out, r * q, op, order, "ReduceScatter out of place, rank " + r);
      // Small inputs are staged (one synchronisation), larger ones reduced in place from the ranks' buffers.
      assertThat(w.stats().orElseThrow().algorithm())
          .isEqualTo(p * q * dtype.size() <= Algorithms.ONE_SHOT_MAX_BYTES ? "staged" : "direct");
      Tensor mine = in.chunk(p, r);
      pg.reduceScatterTensor(mine, in, op);
      OrderSensitiveData.assertReduced(mine, r * q, op, order, "ReduceScatter in place, rank " + r);
    }
    // Reduce to the last rank: staged when small (the root folds the staged copies in rank order), over messages
    // when large (a chain that also ends in rank order); the other ranks' buffers are left exactly as they were.
    int root = p - 1;
    try (Tensor buf = pg.empty(count, dtype); Tensor before = pg.empty(count, dtype)) {
      OrderSensitiveData.fill(buf, r);
      OrderSensitiveData.fill(before, r);
      Work w = pg.reduceAsync(buf, root, op);
      w.waitFor();
      if (r == root) {
        OrderSensitiveData.assertReduced(buf, 0, op, order, "Reduce at the root, rank " + r);
      } else {
        for (long i = 0; i < count; i++) {
          assertThat(buf.getDouble(i)).as("rank %d's buffer at %d after Reduce", r, i).isEqualTo(before.getDouble(i));
        }
      }
      assertThat(w.stats().orElseThrow().algorithm())
          .isEqualTo(count * dtype.size() <= Algorithms.ONE_SHOT_MAX_BYTES ? "staged" : "chain");
    }
  }
}
