package io.nccl4j.conformance;

import io.nccl4j.LocalCluster;
import io.nccl4j.nccl.Nccl;
import io.nccl4j.nccl.NcclCluster;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.stream.IntStream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;

/**
 * The same conformance suite, unchanged, on the NCCL backend: one rank per visible GPU. Skipped, saying why, where NCCL or a GPU is missing. Groups are
 * kept alive across cases (creating a communicator is expensive).
 */
@Tag("gpu")
class NcclConformanceTest extends FormsConformanceSuite {
  private static final Map<Integer, LocalCluster.Session> SESSIONS = new TreeMap<>();

  @BeforeAll
  static void requireGpu() {
    String reason = Nccl.unavailableReason(1);
    if (reason != null) {
      System.out.println("NcclConformanceTest skipped: " + reason);
    }
    Assumptions.assumeTrue(reason == null, reason);
  }

  @AfterAll
  static void closeSessions() {
    synchronized (SESSIONS) {
      SESSIONS.values().forEach(LocalCluster.Session::close);
      SESSIONS.clear();
    }
  }

  @Override
  protected Runner runner() {
    return new Runner() {
      @Override
      public <T> List<T> call(int worldSize, LocalCluster.RankCall<T> task) {
        LocalCluster.Session s;
        synchronized (SESSIONS) {
          s = SESSIONS.get(worldSize);
          if (s == null) {
            s = LocalCluster.of(worldSize).timeout(Duration.ofSeconds(120)).strictMemory(true)
                .backend(NcclCluster.of(Nccl.load())).open();
            SESSIONS.put(worldSize, s);
          }
        }
        try {
          return s.call(task);
        } catch (RuntimeException e) {
          synchronized (SESSIONS) {
            SESSIONS.remove(worldSize);
          }
          s.close();
          throw e;
        }
      }
    };
  }

  /**
   * One rank per GPU, up to 8: the ranks are threads of this JVM, and NCCL does not support threads of
   * one process driving ranks of one communicator on one GPU (NcclPlacement). {@code
   * NCCL4J_GPU_WORLD_SIZES} (e.g. "1" or "2") picks some of them, so that ci/gpu-check.sh can time each
   * apart.
   */
  @Override
  protected int[] worldSizes() {
    Nccl nccl = Nccl.load();
    int max = nccl.deviceCount();
    String only = System.getenv("NCCL4J_GPU_WORLD_SIZES");
    java.util.Set<Integer> chosen = only == null || only.isBlank() ? null : java.util.Arrays.stream(only.split(","))
        .map(String::trim).map(Integer::valueOf).collect(java.util.stream.Collectors.toSet());
    return IntStream.of(1, 2, 3, 4, 5, 8).filter(p -> p <= max).filter(p -> chosen == null || chosen.contains(p))
        .toArray();
  }

  /** Every type; float8 only where NCCL can reduce it (sm_90 and newer, NCCL ≥ 2.24). */
  @Override
  protected List<io.nccl4j.DType> dtypes() {
    Nccl nccl = Nccl.load();
    boolean fp8 = nccl.reducesFloat8(0);
    if (!fp8) {
      System.out.println("NcclConformanceTest: float8 left out: NCCL " + nccl.version() + ", compute capability "
          + nccl.computeCapabilityMajor(0) + ".x (needs NCCL >= 2.24 and sm_90)");
    }
    return java.util.Arrays.stream(io.nccl4j.DType.values()).filter(t -> fp8 || !t.isFloat8()).toList();
  }
}
