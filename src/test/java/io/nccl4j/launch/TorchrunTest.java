package io.nccl4j.launch;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.assertj.core.api.Assertions.assertThat;

import io.nccl4j.testing.TestTime;
import io.nccl4j.testing.TorchPythons;
import java.io.IOException;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * Ranks under PyTorch's own launcher: {@code torchrun --no-python java … RankMains$AllReduce} with torchrun's
 * agent hosting the store (TORCHELASTIC_USE_AGENT_STORE=True), once with torch 2.x's torchrun and once with
 * Debian's 1.13 (which names its options with underscores and needs {@code --redirects 1 --tee 1} on Python 3.11,
 * a bug of its own). Each skips, naming the install, when that torchrun is absent; {@code .ci/run} installs both.
 */
@Tag("multiprocess")
class TorchrunTest {
  @Test
  void torchTwosTorchrunRunsJavaRanksOnTheAgentsStore() throws Exception {
    String python = TorchPythons.current().orElseGet(() -> {
      Assumptions.abort(TorchPythons.CURRENT_HOW);
      return null;
    });
    Path torchrun = Path.of(python).resolveSibling("torchrun");
    Assumptions.assumeTrue(Files.isExecutable(torchrun), "no torchrun beside " + python);
    runAllReduce(List.of(torchrun.toString(), "--nproc-per-node", "3", "--no-python"), 3);
  }

  @Test
  void debiansTorchrunRunsJavaRanksOnTheAgentsStore() throws Exception {
    Optional<String> python = TorchPythons.legacy();
    Assumptions.assumeTrue(python.isPresent() && Files.isExecutable(Path.of("/usr/bin/torchrun")),
        TorchPythons.LEGACY_HOW);
    runAllReduce(List.of("/usr/bin/torchrun", "--nproc_per_node", "2", "--redirects", "1", "--tee", "1",
        "--no_python"), 2);
  }

  private static void runAllReduce(List<String> torchrun, int ranks) throws Exception {
    int port;
    try (ServerSocket free = new ServerSocket(0)) {
      port = free.getLocalPort();
    }
    List<String> cmd = new ArrayList<>(torchrun.subList(0, 1));
    cmd.addAll(List.of(torchrun.get(1).startsWith("--nproc-") ? "--master-port" : "--master_port",
        String.valueOf(port)));
    cmd.addAll(torchrun.subList(1, torchrun.size()));
    cmd.addAll(ChildJvms.javaCommand(RankMains.AllReduce.class));
    ProcessBuilder pb = new ProcessBuilder(cmd).redirectErrorStream(true);
    Map<String, String> env = pb.environment();
    env.put("PYENV_VERSION", "system");
    env.put("PYTHONWARNINGS", "ignore");
    env.keySet().removeIf(k -> k.startsWith("NCCL4J_JOB_") || k.equals("RANK") || k.equals("WORLD_SIZE"));
    Process p = pb.start();
    p.getOutputStream().close();
    String out = new String(p.getInputStream().readAllBytes(), UTF_8);
    assertThat(p.waitFor(TestTime.scaledSeconds(120), TimeUnit.SECONDS)).isTrue();
    assertThat(p.exitValue()).as(out).isZero();
    long[] expected = RankMains.expectedSum(ranks, 6);
    for (int r = 0; r < ranks; r++) {
      assertThat(out).as(out).contains("source=torchrun rank=" + r + " size=" + ranks)
          .contains("result=" + Arrays.toString(expected));
    }
  }

  /**
   * torchrun restarts the workers after rank 1 fails in the first attempt: the second attempt's ranks
   * make a clean group on the agent's store (a new attempt's namespace) and all-reduce exactly.
   */
  @Test
  void aRestartByTorchrunGivesACleanNewGroup() throws Exception {
    String python = TorchPythons.current().orElseGet(() -> {
      Assumptions.abort(TorchPythons.CURRENT_HOW);
      return null;
    });
    Path torchrun = Path.of(python).resolveSibling("torchrun");
    Assumptions.assumeTrue(Files.isExecutable(torchrun), "no torchrun beside " + python);
    int port;
    try (ServerSocket free = new ServerSocket(0)) {
      port = free.getLocalPort();
    }
    List<String> cmd = new ArrayList<>(List.of(torchrun.toString(), "--master-port", String.valueOf(port),
        "--nproc-per-node", "2", "--max-restarts", "1", "--no-python"));
    cmd.addAll(ChildJvms.javaCommand(RankMains.FailFirstAttempt.class));
    ProcessBuilder pb = new ProcessBuilder(cmd).redirectErrorStream(true);
    pb.environment().put("PYTHONWARNINGS", "ignore");
    pb.environment().keySet().removeIf(k -> k.startsWith("NCCL4J_JOB_") || k.equals("RANK") || k.equals("WORLD_SIZE"));
    Process p = pb.start();
    p.getOutputStream().close();
    String out = new String(p.getInputStream().readAllBytes(), UTF_8);
    assertThat(p.waitFor(TestTime.scaledSeconds(180), TimeUnit.SECONDS)).isTrue();
    assertThat(p.exitValue()).as(out).isZero();
    String expected = Arrays.toString(RankMains.expectedSum(2, 6));
    assertThat(out).as(out).contains("attempt=0 rank=1 result=" + expected)
        .contains("attempt=1 rank=0 size=2 result=" + expected).contains("attempt=1 rank=1 size=2 result=" + expected);
  }

  @Test
  void theAgentStoreIsReadFromTorchrunsVariables() throws IOException {
    assertThat(AgentStore.from(Map.of())).isEmpty();
    assertThat(AgentStore.from(Map.of(AgentStore.USE_AGENT_STORE, "False"))).isEmpty();
    AgentStore a = AgentStore.from(Map.of(AgentStore.USE_AGENT_STORE, "True", "TORCHELASTIC_RESTART_COUNT", "3",
        "TORCHELASTIC_RUN_ID", "run-7")).orElseThrow();
    assertThat(a).isEqualTo(new AgentStore(3, "run-7"));
    // PyTorch 1.x's own namespace for an attempt: a restart gives a clean one.
    assertThat(a.prefix()).isEqualTo("/worker/attempt_3");
    assertThat(AgentStore.from(Map.of(AgentStore.USE_AGENT_STORE, "True")).orElseThrow().prefix())
        .isEqualTo("/worker/attempt_0");
    assertThat(org.assertj.core.api.Assertions.catchThrowable(() -> AgentStore.from(Map.of(AgentStore.USE_AGENT_STORE,
        "True", "TORCHELASTIC_RESTART_COUNT", "x")))).hasMessage("TORCHELASTIC_RESTART_COUNT must be an integer, got 'x'");
  }
}
