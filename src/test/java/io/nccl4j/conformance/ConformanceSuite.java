package io.nccl4j.conformance;

import static org.assertj.core.api.Assertions.assertThat;

import io.nccl4j.DType;
import io.nccl4j.LocalCluster;
import io.nccl4j.ProcessGroup;
import io.nccl4j.ReduceOp;
import io.nccl4j.Tensor;
import io.nccl4j.testing.Compare;
import io.nccl4j.testing.TestData;
import io.nccl4j.testing.Tier;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.EnumSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.stream.Stream;
import org.junit.jupiter.api.DynamicContainer;
import org.junit.jupiter.api.DynamicNode;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.TestFactory;

/**
 * The conformance suite, written once against {@link ProcessGroup} and run against every backend:
 * every collective × every dtype × every operator it allows × world sizes × counts, in place and
 * out of place, against a naive oracle. A backend's test class supplies how groups are made, which
 * world sizes it can run, and how host data reaches the device.
 *
 * <p>Every case checks every element of every rank's output, and that out-of-place inputs are left
 * unchanged; a failure names the case, the rank, the number of wrong elements and the first one.
 */
public abstract class ConformanceSuite {
  /** Over a million elements, and not a multiple of any world size used. */
  public static final long LARGE = (1L << 20) + 7;

  /** Starts one group per rank and runs the task on each; returns results by rank. */
  protected interface Runner {
    <T> List<T> call(int worldSize, LocalCluster.RankCall<T> task);
  }

  protected abstract Runner runner();

  /** The tier whose cases the factories make: this run's, or another for {@link ConformanceInventoryTest}. */
  Tier tier = Tier.current();

  protected abstract int[] worldSizes();

  protected long[] counts() {
    return new long[] {0, 1, 7, 1003, LARGE};
  }

  /**
   * The operators a CI run takes to {@link #LARGE}: a plain combine (SUM), a comparison with a
   * non-zero identity and NaN operands (MAX), and a combine with a scaling pass (AVG: a premultiplier
   * for floating types, a final division for integers). What LARGE adds to counts 0–1003 is chunking
   * (a million elements span many of every algorithm's chunks and pieces), and chunks are sized in
   * bytes by the algorithm, not by the operator; every operator's arithmetic is proven at every
   * other count. The nightly tier runs every operator at LARGE.
   */
  static final Set<ReduceOp.Kind> LARGE_OPS = EnumSet.of(ReduceOp.Kind.SUM, ReduceOp.Kind.MAX, ReduceOp.Kind.AVG);

  /** The order in which {@link #largeDTypes} picks a runner's dtype of each width (integers and floats alternate). */
  private static final List<DType> LARGE_PREFERENCE = List.of(DType.INT64, DType.FLOAT32, DType.FLOAT16, DType.UINT8,
      DType.INT32, DType.BFLOAT16, DType.FLOAT64, DType.INT8, DType.UINT32, DType.UINT64, DType.FLOAT8_E4M3FN,
      DType.FLOAT8_E5M2);

  /**
   * The dtypes a CI run takes to {@link #LARGE}: one of each element width among {@link #dtypes()}
   * (chunk boundaries fall by bytes, so the width is what LARGE can tell apart).
   */
  List<DType> largeDTypes() {
    Map<Integer, DType> byWidth = new TreeMap<>();
    for (DType t : LARGE_PREFERENCE) {
      if (dtypes().contains(t)) {
        byWidth.putIfAbsent(t.size(), t);
      }
    }
    return new ArrayList<>(byWidth.values());
  }

  /**
   * The world sizes a CI run takes to {@link #LARGE}: among {@link #worldSizes()}, the smallest of
   * two or more ranks, the first odd one and the largest. Blocks of a million elements split
   * differently for even and odd world sizes and into the most pieces at the largest; the sizes
   * between add no chunk layout these do not, and every world size runs at every other count.
   */
  Set<Integer> largeWorldSizes() {
    Set<Integer> sizes = new TreeSet<>();
    int[] all = Arrays.stream(worldSizes()).filter(p -> p >= 2).sorted().toArray();
    if (all.length > 0) {
      sizes.add(all[0]);
      sizes.add(all[all.length - 1]);
      Arrays.stream(all).filter(p -> p % 2 == 1).findFirst().ifPresent(sizes::add);
    }
    return sizes;
  }

  /**
   * Whether this run includes the case at count {@code n} for {@code t} and {@code op} (null for
   * collectives that do not reduce) at world size {@code p}: every count but {@link #LARGE} always;
   * LARGE never in the quick tier, for {@link #largeWorldSizes} × {@link #largeDTypes} ×
   * {@link #LARGE_OPS} in CI, always in the nightly tier.
   */
  boolean runs(int p, long n, DType t, ReduceOp op) {
    if (n != LARGE) {
      return true;
    }
    switch (tier) {
      case QUICK:
        return false;
      case NIGHTLY:
        return true;
      default:
        return largeWorldSizes().contains(p) && largeDTypes().contains(t)
            && (op == null || LARGE_OPS.contains(op.kind()));
    }
  }

  /** The dtypes every case runs with (default: all of them). */
  protected List<DType> dtypes() {
    return Arrays.asList(DType.values());
  }

  /** Copies a host tensor to the group's device. */
  protected Tensor upload(ProcessGroup pg, Tensor host) {
    return host.copy(pg.allocator());
  }

  /** Copies a device tensor to a new host tensor. */
  protected Tensor download(Tensor t) {
    return t.copy();
  }

  static List<ReduceOp> ops(DType t) {
    List<ReduceOp> ops = new ArrayList<>(List.of(ReduceOp.SUM, ReduceOp.PRODUCT, ReduceOp.MIN, ReduceOp.MAX,
        ReduceOp.AVG));
    if (t.isFloatingPoint() && !t.isFloat8()) {
      ops.add(ReduceOp.premulSum(TestData.PREMUL_SCALAR));
    }
    return ops;
  }

  /** A test case: returns failure descriptions (empty when every rank is right). */
  @FunctionalInterface
  protected interface Case {
    List<String> run(int p, DType t, long n, ReduceOp op);
  }

  Stream<DynamicNode> matrix(String name, boolean reduces, Case c) {
    return matrix(name, reduces, 1, c);
  }

  /**
   * For collectives whose tensors hold one block per rank (reduce-scatter input, all-gather output,
   * all-to-all), the large case sizes the block so that the whole tensor just exceeds LARGE.
   */
  static long blockCount(long n, int p) {
    return n == LARGE ? (LARGE + p - 1) / p : n;
  }

  Stream<DynamicNode> matrix(String name, boolean reduces, int minWorld, Case c) {
    return matrix(name, reduces, minWorld, counts(), c);
  }

  Stream<DynamicNode> matrix(String name, boolean reduces, int minWorld, long[] counts, Case c) {
    List<DynamicNode> byWorld = new ArrayList<>();
    for (int p : worldSizes()) {
      if (p < minWorld) {
        continue;
      }
      List<DynamicNode> byType = new ArrayList<>();
      for (DType t : dtypes()) {
        List<DynamicNode> tests = new ArrayList<>();
        for (long n : counts) {
          for (ReduceOp op : reduces ? ops(t) : Collections.<ReduceOp>singletonList(null)) {
            if (!runs(p, n, t, op)) {
              continue;
            }
            String label = "count " + n + (op == null ? "" : ", " + op);
            tests.add(DynamicTest.dynamicTest(label, () -> {
              List<String> failures = c.run(p, t, n, op);
              assertThat(failures).as("%s, world size %d, %s, %s", name, p, t, label).isEmpty();
            }));
          }
        }
        byType.add(DynamicContainer.dynamicContainer(t.torchName(), tests));
      }
      byWorld.add(DynamicContainer.dynamicContainer("world size " + p, byType));
    }
    return byWorld.stream();
  }

  static List<String> flatten(List<List<String>> perRank) {
    List<String> all = new ArrayList<>();
    perRank.forEach(all::addAll);
    return all;
  }

  static void check(List<String> failures, String what, int rank, Tensor actual, Tensor expected,
      double atol) {
    String m = Compare.mismatch(actual, expected, atol);
    if (!m.isEmpty()) {
      failures.add("rank " + rank + " " + what + ": " + m);
    }
  }

  // ------------------------------------------------------------------ AllReduce

  @TestFactory
  Stream<DynamicNode> allReduce() {
    return matrix("allReduce", true, (p, t, n, op) -> {
      Tensor expected = TestData.reduced(t, op, p, n);
      double atol = TestData.tolerance(t, op, p);
      try (expected) {
        return flatten(runner().call(p, pg -> {
          List<String> failures = new ArrayList<>();
          int r = pg.rank();
          try (Tensor host = TestData.input(t, n, op, p, r);
               Tensor a = upload(pg, host);
               Tensor b = upload(pg, host);
               Tensor out = pg.empty(n, t)) {
            pg.allReduce(a, op);
            try (Tensor got = download(a)) {
              check(failures, "in place", r, got, expected, atol);
            }
            pg.allReduce(out, b, op);
            try (Tensor got = download(out); Tensor in = download(b)) {
              check(failures, "out of place", r, got, expected, atol);
              check(failures, "out-of-place input", r, in, host, 0);
            }
          }
          return failures;
        }));
      }
    });
  }

  // ------------------------------------------------------------------ ReduceScatter

  @TestFactory
  Stream<DynamicNode> reduceScatter() {
    return matrix("reduceScatterTensor", true, (p, t, count, op) -> {
      long n = blockCount(count, p);
      Tensor expected = TestData.reduced(t, op, p, p * n);
      double atol = TestData.tolerance(t, op, p);
      try (expected) {
        return flatten(runner().call(p, pg -> {
          List<String> failures = new ArrayList<>();
          int r = pg.rank();
          Tensor mine = expected.chunk(p, r);
          try (Tensor host = TestData.input(t, p * n, op, p, r);
               Tensor in = upload(pg, host);
               Tensor inPlace = upload(pg, host);
               Tensor out = pg.empty(n, t)) {
            pg.reduceScatterTensor(out, in, op);
            try (Tensor got = download(out); Tensor input = download(in)) {
              check(failures, "out of place", r, got, mine, atol);
              check(failures, "out-of-place input", r, input, host, 0);
            }
            Tensor block = inPlace.chunk(p, r);
            pg.reduceScatterTensor(block, inPlace, op);
            try (Tensor got = download(block)) {
              check(failures, "in place", r, got, mine, atol);
            }
          }
          return failures;
        }));
      }
    });
  }

  // ------------------------------------------------------------------ AllGather

  @TestFactory
  Stream<DynamicNode> allGather() {
    return matrix("allGatherIntoTensor", false, (p, t, count, op) -> {
      long n = blockCount(count, p);
      Tensor expected = TestData.gathered(t, p, n);
      try (expected) {
        return flatten(runner().call(p, pg -> {
          List<String> failures = new ArrayList<>();
          int r = pg.rank();
          try (Tensor host = TestData.input(t, n, null, p, r);
               Tensor in = upload(pg, host);
               Tensor out = pg.zeros(p * n, t);
               Tensor inPlace = pg.zeros(p * n, t)) {
            pg.allGatherIntoTensor(out, in);
            try (Tensor got = download(out); Tensor input = download(in)) {
              check(failures, "out of place", r, got, expected, 0);
              check(failures, "out-of-place input", r, input, host, 0);
            }
            Tensor block = inPlace.chunk(p, r);
            try (Tensor staged = upload(pg, host)) {
              copyInto(block, staged);
            }
            pg.allGatherIntoTensor(inPlace, block);
            try (Tensor got = download(inPlace)) {
              check(failures, "in place", r, got, expected, 0);
            }
          }
          return failures;
        }));
      }
    });
  }

  /** Device-to-device copy used to stage in-place inputs; backends override with their device copy. */
  protected void copyInto(Tensor dst, Tensor src) {
    dst.copyFrom(src);
  }

  // ------------------------------------------------------------------ Broadcast

  @TestFactory
  Stream<DynamicNode> broadcast() {
    return matrix("broadcast", false, (p, t, n, op) -> flatten(runner().call(p, pg -> {
      List<String> failures = new ArrayList<>();
      int r = pg.rank();
      for (int root : roots(p)) {
        try (Tensor host = TestData.input(t, n, null, p, r);
             Tensor expected = TestData.input(t, n, null, p, root);
             Tensor buf = upload(pg, host)) {
          pg.broadcast(buf, root);
          try (Tensor got = download(buf)) {
            check(failures, "root " + root, r, got, expected, 0);
          }
        }
      }
      return failures;
    })));
  }

  static int[] roots(int p) {
    return p == 1 ? new int[] {0} : new int[] {0, p - 1};
  }

  // ------------------------------------------------------------------ Reduce

  @TestFactory
  Stream<DynamicNode> reduce() {
    return matrix("reduce", true, (p, t, n, op) -> {
      Tensor expected = TestData.reduced(t, op, p, n);
      double atol = TestData.tolerance(t, op, p);
      try (expected) {
        return flatten(runner().call(p, pg -> {
          List<String> failures = new ArrayList<>();
          int r = pg.rank();
          for (int root : roots(p)) {
            try (Tensor host = TestData.input(t, n, op, p, r); Tensor buf = upload(pg, host)) {
              pg.reduce(buf, root, op);
              try (Tensor got = download(buf)) {
                if (r == root) {
                  check(failures, "root " + root, r, got, expected, atol);
                } else {
                  check(failures, "non-root (must be unchanged), root " + root, r, got, host, 0);
                }
              }
            }
          }
          return failures;
        }));
      }
    });
  }

  // ------------------------------------------------------------------ AllToAll

  /** Elements rank i sends to rank j: equal blocks of n, or ragged around n. */
  static long split(boolean ragged, long n, int i, int j) {
    return ragged ? n + Math.floorMod(i + 2 * j, 3) : n;
  }

  @TestFactory
  Stream<DynamicNode> allToAllSingle() {
    return matrix("allToAllSingle", false, (p, t, count, op) -> flatten(runner().call(p, pg -> {
      long n = blockCount(count, p);
      List<String> failures = new ArrayList<>();
      int r = pg.rank();
      for (boolean ragged : new boolean[] {false, true}) {
        long[] inSplits = new long[p];
        long[] outSplits = new long[p];
        for (int j = 0; j < p; j++) {
          inSplits[j] = split(ragged, n, r, j);
          outSplits[j] = split(ragged, n, j, r);
        }
        long inCount = Arrays.stream(inSplits).sum();
        long outCount = Arrays.stream(outSplits).sum();
        try (Tensor host = TestData.input(t, inCount, null, p, r);
             Tensor expected = Tensor.empty(outCount, t);
             Tensor in = upload(pg, host);
             Tensor out = pg.empty(outCount, t)) {
          long pos = 0;
          for (int src = 0; src < p; src++) {
            long srcOffset = 0;
            for (int j = 0; j < r; j++) {
              srcOffset += split(ragged, n, src, j);
            }
            TestData.fill(expected.slice(pos, outSplits[src]), null, p, src, srcOffset);
            pos += outSplits[src];
          }
          if (ragged) {
            pg.allToAllSingle(out, in, outSplits, inSplits);
          } else {
            pg.allToAllSingle(out, in);
          }
          try (Tensor got = download(out); Tensor input = download(in)) {
            check(failures, ragged ? "ragged" : "equal split", r, got, expected, 0);
            check(failures, "input", r, input, host, 0);
          }
        }
      }
      return failures;
    })));
  }

  // ------------------------------------------------------------------ Send / Recv

  @TestFactory
  Stream<DynamicNode> sendRecv() {
    return matrix("send/recv", false, 2, (p, t, n, op) -> flatten(runner().call(p, pg -> {
      List<String> failures = new ArrayList<>();
      int r = pg.rank();
      // Every ordered pair, in one global order: both ends see the same sequence, nothing deadlocks.
      for (int a = 0; a < p; a++) {
        for (int b = 0; b < p; b++) {
          if (a == b || (r != a && r != b)) {
            continue;
          }
          if (r == a) {
            try (Tensor host = TestData.input(t, n, null, p, a); Tensor buf = upload(pg, host)) {
              pg.send(buf, b);
              try (Tensor input = download(buf)) {
                check(failures, "sent buffer to " + b, r, input, host, 0);
              }
            }
          } else {
            try (Tensor expected = TestData.input(t, n, null, p, a); Tensor buf = pg.zeros(n, t)) {
              pg.recv(buf, a);
              try (Tensor got = download(buf)) {
                check(failures, "received from " + a, r, got, expected, 0);
              }
            }
          }
        }
      }
      return failures;
    })));
  }
}
