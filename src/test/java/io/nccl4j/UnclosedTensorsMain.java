package io.nccl4j;

import io.nccl4j.memory.LeakReport;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;

/**
 * Child-JVM program of {@link LeakWarningsWithoutSlf4jTest}: rank 1 of a two-rank {@link LocalCluster} returns
 * without closing a tensor of its group's allocator ({@link #leakGroupTensor}) and one of the process-wide host
 * allocator ({@link #leakHostTensor}), both kept reachable so that the collector does not report them first; then a
 * third tensor is dropped ({@link #dropOne}) and the collector is run until it reports it. Prints whether it did,
 * and exits 0.
 */
public final class UnclosedTensorsMain {
  private static final List<Tensor> KEPT = new CopyOnWriteArrayList<>();

  private UnclosedTensorsMain() {}

  static Tensor leakGroupTensor(ProcessGroup pg) {
    return pg.empty(5, DType.INT64);
  }

  static Tensor leakHostTensor() {
    return Tensor.empty(7, DType.INT32);
  }

  static void dropOne() {
    Tensor.empty(4099, DType.FLOAT32);
  }

  public static void main(String[] args) throws InterruptedException {
    LocalCluster.of(2).run(pg -> {
      if (pg.rank() == 1) {
        KEPT.add(leakGroupTensor(pg));
        KEPT.add(leakHostTensor());
      }
    });
    long before = LeakReport.count();
    dropOne();
    for (int round = 0; round < 600 && LeakReport.count() == before; round++) {
      System.gc();
      Thread.sleep(20);
    }
    System.out.println("the collector reported the dropped tensor: " + (LeakReport.count() > before));
    System.out.flush();
    System.exit(0);
  }
}
