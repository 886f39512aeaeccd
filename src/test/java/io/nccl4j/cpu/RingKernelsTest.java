package io.nccl4j.cpu;

import static org.assertj.core.api.Assertions.assertThat;

import io.nccl4j.DType;
import io.nccl4j.LocalCluster;
import io.nccl4j.ProcessGroup;
import io.nccl4j.ReduceOp;
import io.nccl4j.Tensor;
import io.nccl4j.Work;
import io.nccl4j.internal.transport.tcp.TcpThreadsCluster;
import io.nccl4j.spi.ClusterBackend;
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
 * The ring's hops with the native kernels and in Java, over the threads' mailboxes
 * ({@code NCCL4J_CPU_ALGO=ring}) and over TCP (parts of 1 MiB, so a hop combines at offsets within
 * its block), against an oracle that folds the ranks' values in the ring's documented order: block
 * c of an AllReduce or ReduceScatter as x_{c+1} ⊕ x_{c+2} ⊕ … ⊕ x_c, a Reduce to root as x_{root+1}
 * ⊕ … ⊕ x_root. The floating-point data is order-sensitive, so both paths must take exactly that
 * order and agree bit for bit. Operators without a kernel (floating MIN) and with a post-operation
 * (integer AVG: the sum natively, the division in Java) are among the cases.
 */
@Tag("unit")
class RingKernelsTest {
  private static final Duration TIMEOUT = TestTime.seconds(60);

  static Stream<Arguments> cases() {
    List<Arguments> out = new ArrayList<>();
    for (String transport : new String[] {"threads", "tcp"}) {
      for (String kernels : new String[] {"native", "java"}) {
        for (int p : new int[] {2, 3}) {
          for (Object[] op : OrderSensitiveData.OPERATORS) {
            // Over TCP, 700 001 elements: blocks of unequal length, each more than one 1 MiB part for 8-byte types.
            out.add(Arguments.of(transport, kernels, p, transport.equals("tcp") ? 700_001L : 40_003L, op[0], op[1]));
          }
        }
      }
    }
    return out.stream();
  }

  @ParameterizedTest(name = "{0}, {1} kernels, {2} ranks, {3} elements, {4} {5}")
  @MethodSource("cases")
  void hopsCombineInRingOrder(String transport, String kernels, int p, long count, DType dtype, ReduceOp op) {
    CpuOptions options = CpuOptions.defaults().withAlgorithms(CpuOptions.Algorithms.RING)
        .withKernels(CpuOptions.Kernels.valueOf(kernels.toUpperCase(Locale.ROOT)));
    ClusterBackend cluster = transport.equals("tcp") ? new TcpThreadsCluster(options) : CpuCluster.of(options);
    LocalCluster.of(p).timeout(TIMEOUT).strictMemory(true).backend(cluster)
        .run(pg -> check(pg, p, count, dtype, op));
  }

  /** The ranks c+1, c+2, …, c+p (mod p): the order in which the ring accumulates block c. */
  private static int[] ringOrder(int p, int c) {
    int[] order = new int[p];
    for (int k = 0; k < p; k++) {
      order[k] = (c + 1 + k) % p;
    }
    return order;
  }

  /** The block of element i when {@code count} elements are cut into p blocks as the ring cuts them. */
  private static int blockOf(long i, long count, int p) {
    long q0 = count / p;
    long rem = count % p;
    int c = 0;
    while (c + 1 < p && Blocks.start(c + 1, q0, rem) <= i) {
      c++;
    }
    return c;
  }

  private static void check(ProcessGroup pg, int p, long count, DType dtype, ReduceOp op) {
    int r = pg.rank();
    try (Tensor in = pg.empty(count, dtype); Tensor out = pg.empty(count, dtype)) {
      OrderSensitiveData.fill(in, r);
      Work w = pg.allReduceAsync(out, in, op);
      w.waitFor();
      assertThat(w.stats().orElseThrow().algorithm()).isEqualTo("ring");
      OrderSensitiveData.assertReduced(out, 0, op, i -> ringOrder(p, blockOf(i, count, p)),
          "AllReduce out of place, rank " + r);
      pg.allReduce(in, op);
      OrderSensitiveData.assertReduced(in, 0, op, i -> ringOrder(p, blockOf(i, count, p)),
          "AllReduce in place, rank " + r);
    }
    long q = count / p;
    try (Tensor in = pg.empty(q * p, dtype); Tensor out = pg.empty(q, dtype)) {
      OrderSensitiveData.fill(in, r);
      pg.reduceScatterTensor(out, in, op);
      OrderSensitiveData.assertReduced(out, r * q, op, i -> ringOrder(p, r), "ReduceScatter, rank " + r);
    }
    int root = p - 1;
    try (Tensor buf = pg.empty(count, dtype)) {
      OrderSensitiveData.fill(buf, r);
      pg.reduce(buf, root, op);
      if (r == root) {
        OrderSensitiveData.assertReduced(buf, 0, op, i -> ringOrder(p, root), "Reduce to rank " + root);
      }
    }
  }
}
