package io.nccl4j.launch;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowable;

import io.nccl4j.Validation;
import io.nccl4j.testing.TestTime;
import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * A world larger than the job's store serves (a rank waits for every rank's key in one request, at most
 * NCCL4J_STORE_MAX_KEY_BYTES keys, 65 536 by default) is refused by init before anything listens, naming the
 * variable, its value and the limit. Before, rank 0 hosted the store, init returned, and the first collective failed
 * with "TCP store 127.0.0.1:P: connection failed during wait([pg1/shm/segment/0, … 70 000 keys]): Broken pipe (the
 * process hosting the store, rank 0, may have exited)".
 */
@Tag("unit")
class WorldSizeLimitTest {
  private static final Duration TIMEOUT = TestTime.seconds(60);
  private static final Duration FAST = TestTime.seconds(5);

  private static String refusal(String variable, int size) {
    return variable + "=" + size + " is above 65536, the most ranks a job's store serves: each rank waits for every"
        + " rank's key in one store request, and a request names at most 65536 keys (NCCL4J_STORE_MAX_KEY_BYTES, or"
        + " the system property nccl4j.store.maxKeyBytes); set it to at least " + size + " for every process of the"
        + " job, the store's host included";
  }

  @Test
  void aWorldAboveTheStoresKeyCapIsRefusedByInitBeforeRankZeroListens() throws IOException {
    int port = Launcher.freePort();
    DistEnv env = new DistEnv("127.0.0.1", port, 0, 65537, 0, 1, "torchrun");
    long start = System.nanoTime();
    Throwable e = catchThrowable(() -> ProcessGroups.init(env, ProcessGroups.identity(env, Map.of()),
        InetAddress.getLoopbackAddress(), "cpu", TIMEOUT, Validation.OFF));
    assertThat(Duration.ofNanos(System.nanoTime() - start)).isLessThan(FAST);
    assertThat(e).isInstanceOf(IllegalArgumentException.class).hasMessage(refusal("WORLD_SIZE", 65537));
    try (ServerSocket s = new ServerSocket()) {
      s.bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), port)); // nobody listened on it
    }
  }

  @Test
  void theMessageNamesTheVariableTheLauncherGaveTheSizeIn() {
    DistEnv mpi = new DistEnv("127.0.0.1", 29500, 3, 70000, 3, 8, "openmpi");
    assertThat(catchThrowable(() -> ProcessGroups.checkWorldSize(mpi, 65536)))
        .hasMessage(refusal("OMPI_COMM_WORLD_SIZE", 70000));
    assertThat(new DistEnv("h", 1, 0, 1, 0, 1, "pmi").worldSizeVariable()).isEqualTo("PMI_SIZE");
    assertThat(new DistEnv("h", 1, 0, 1, 0, 1, "slurm").worldSizeVariable()).isEqualTo("SLURM_NTASKS");
    assertThat(new DistEnv("h", 1, 0, 1, 0, 1, "kubeflow").worldSizeVariable()).isEqualTo("PET_NNODES");
    assertThat(new DistEnv("h", 1, 0, 1, 0, 1, "spark").worldSizeVariable()).isEqualTo("WORLD_SIZE");
  }

  @Test
  void theLimitIsTheCapAWorldAtTheCapOrUnderARaisedCapPasses() {
    ProcessGroups.checkWorldSize(new DistEnv("127.0.0.1", 29500, 0, 65536, 0, 1, "torchrun"), 65536);
    ProcessGroups.checkWorldSize(new DistEnv("127.0.0.1", 29500, 0, 70000, 0, 1, "torchrun"), 70000);
  }

  @Test
  void theLauncherRefusesSuchAWorldBeforeAnyRankStarts() {
    Throwable e = catchThrowable(() -> new Launcher(List.of("sh", "-c", "exit 0")).nprocPerNode(65537).run());
    assertThat(e).isInstanceOf(IllegalArgumentException.class).hasMessage("--nnodes 1 × --nproc-per-node 65537 ="
        + " 65537 ranks, above 65536, the most ranks a job's store serves: each rank waits for every rank's key in"
        + " one store request, and a request names at most 65536 keys (NCCL4J_STORE_MAX_KEY_BYTES); set it to at"
        + " least 65537 for the launcher and its ranks");
  }
}
