package com.example.app;

import static org.assertj.core.api.Assertions.assertThat;

import io.nccl4j.launch.Launcher;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * Starts the program as real processes, one per rank, with nccl4j's {@link Launcher} (what
 * {@code nccl4j run --nproc-per-node N --class ...} does): each gets MASTER_ADDR, MASTER_PORT, RANK
 * and WORLD_SIZE, and its output lines come back prefixed with its rank.
 */
class MultiProcessAllReduceTest {
  private Set<Long> before;

  @BeforeEach
  void rememberChildren() {
    before = ProcessHandle.current().descendants().map(ProcessHandle::pid).collect(Collectors.toSet());
  }

  @AfterEach
  void killEverythingStartedHere() {
    ProcessHandle.current().descendants().filter(h -> !before.contains(h.pid()))
        .forEach(ProcessHandle::destroyForcibly);
  }

  private record Launched(int status, List<String> out, String all) {}

  private static Launched launch(int ranks, String... args) throws Exception {
    List<String> cmd = new ArrayList<>(List.of(Paths.get(System.getProperty("java.home"), "bin", "java").toString(),
        "-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp", System.getProperty("java.class.path"),
        MultiProcessAllReduce.class.getName()));
    cmd.addAll(List.of(args));
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    ByteArrayOutputStream err = new ByteArrayOutputStream();
    PrintStream o = new PrintStream(out, true, StandardCharsets.UTF_8);
    PrintStream e = new PrintStream(err, true, StandardCharsets.UTF_8);
    Launcher launcher = new Launcher(cmd).nprocPerNode(ranks).output(o, e);
    // a "did not hang" bound well above the ranks' own 60 s timeout
    int status = CompletableFuture.supplyAsync(launcher::run).get(180, TimeUnit.SECONDS);
    String stdout = out.toString(StandardCharsets.UTF_8);
    return new Launched(status, stdout.lines().toList(),
        stdout + "\n--- stderr ---\n" + err.toString(StandardCharsets.UTF_8));
  }

  @Test
  void threeProcessesAgreeOnTheExactSum() throws Exception {
    Launched l = launch(3);

    // 100·(1 + 2 + 3) + 3·i
    assertThat(l.status()).as(l.all()).isZero();
    assertThat(l.out()).as(l.all()).contains(
        "[rank 0] rank 0 of 3: [600, 603, 606, 609, 612]",
        "[rank 1] rank 1 of 3: [600, 603, 606, 609, 612]",
        "[rank 2] rank 2 of 3: [600, 603, 606, 609, 612]");
  }

  @Test
  void twoProcessesSumTheCountGivenAsArgument() throws Exception {
    Launched l = launch(2, "3");

    // 100·(1 + 2) + 2·i
    assertThat(l.status()).as(l.all()).isZero();
    assertThat(l.out()).as(l.all()).contains("[rank 0] rank 0 of 2: [300, 302, 304]",
        "[rank 1] rank 1 of 2: [300, 302, 304]");
  }

  @Test
  void theExpectedSumIsTheSumOfTheContributions() {
    for (int p = 1; p <= 4; p++) {
      long[] expected = MultiProcessAllReduce.expectedSum(p, 5);
      for (int i = 0; i < 5; i++) {
        long sum = 0;
        for (int r = 0; r < p; r++) {
          sum += MultiProcessAllReduce.contribution(r, i);
        }
        assertThat(expected[i]).as("p=%d, i=%d", p, i).isEqualTo(sum);
      }
    }
  }
}
