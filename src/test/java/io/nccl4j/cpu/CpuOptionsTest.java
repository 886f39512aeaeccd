package io.nccl4j.cpu;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.nccl4j.spi.ClusterBackend;
import io.nccl4j.testing.TestTime;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/** A cluster's CPU options reach every rank's backend, whatever the environment says. */
@Tag("unit")
class CpuOptionsTest {
  private static List<String> chosen(CpuCluster cluster, int p) {
    ClusterBackend.Run run = cluster.start(p, TestTime.seconds(30), "options-test-" + System.nanoTime());
    List<CpuBackend> backends = new ArrayList<>();
    try {
      List<String> out = new ArrayList<>();
      for (int r = 0; r < p; r++) {
        CpuBackend b = (CpuBackend) run.create(r);
        backends.add(b);
        out.add(b.algorithmsInUse());
      }
      return out;
    } finally {
      backends.forEach(CpuBackend::close);
    }
  }

  @Test
  void eachChoiceReachesEveryRank() {
    assertThat(chosen(CpuCluster.of(CpuOptions.defaults().withAlgorithms(CpuOptions.Algorithms.RING)), 2))
        .containsOnly(NativeKernels.available() ? "ring/native" : "ring/java");
    assertThat(chosen(CpuCluster.of(CpuOptions.defaults().withAlgorithms(CpuOptions.Algorithms.RING)
        .withKernels(CpuOptions.Kernels.JAVA)), 2)).containsOnly("ring/java");
    assertThat(chosen(CpuCluster.of(CpuOptions.defaults().withKernels(CpuOptions.Kernels.JAVA)), 2))
        .containsOnly("shared/java");
    assertThat(chosen(CpuCluster.of(CpuOptions.defaults()), 2))
        .containsOnly(NativeKernels.available() ? "shared/native" : "shared/java");
  }

  @Test
  void optionsAreNeverNull() {
    assertThatThrownBy(() -> new CpuOptions(null, CpuOptions.Kernels.JAVA)).isInstanceOf(NullPointerException.class)
        .hasMessage("algorithms");
    assertThatThrownBy(() -> CpuCluster.of(null)).isInstanceOf(NullPointerException.class).hasMessage("options");
  }

  /**
   * The public enums hold what applications choose; the experiments' settings (docs/PERFORMANCE.md) stay reachable
   * through the environment, which the experiments' commands set, and package-private methods for the tests.
   */
  @Test
  void theExperimentsSettingsAreNotInThePublicEnums() {
    assertThat(CpuOptions.Algorithms.values()).containsExactly(CpuOptions.Algorithms.AUTO, CpuOptions.Algorithms.RING);
    assertThat(CpuOptions.Kernels.values()).containsExactly(CpuOptions.Kernels.NATIVE, CpuOptions.Kernels.JAVA);
    System.setProperty("nccl4j.cpu.algo", "phased");
    System.setProperty("nccl4j.cpu.kernels", "cached");
    try {
      CpuOptions o = CpuOptions.fromEnvironment();
      assertThat(o.algorithms()).isEqualTo(CpuOptions.Algorithms.AUTO);
      assertThat(o.phasedAllReduce()).isTrue();
      assertThat(o.kernels()).isEqualTo(CpuOptions.Kernels.NATIVE);
      assertThat(o.kernelChoice()).isEqualTo(KernelChoice.CACHED);
      assertThat(o).isEqualTo(CpuOptions.defaults().withPhasedAllReduce().withCachedStores())
          .isNotEqualTo(CpuOptions.defaults()).hasToString("CpuOptions[algorithms=phased, kernels=cached]");
      System.setProperty("nccl4j.cpu.algo", "ring");
      System.setProperty("nccl4j.cpu.kernels", "java");
      assertThat(CpuOptions.fromEnvironment()).isEqualTo(new CpuOptions(CpuOptions.Algorithms.RING,
          CpuOptions.Kernels.JAVA));
      assertThat(CpuOptions.fromEnvironment().kernelChoice()).isEqualTo(KernelChoice.JAVA);
    } finally {
      System.clearProperty("nccl4j.cpu.algo");
      System.clearProperty("nccl4j.cpu.kernels");
    }
  }
}
