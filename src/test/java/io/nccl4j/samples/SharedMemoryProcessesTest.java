package io.nccl4j.samples;

import static org.assertj.core.api.Assertions.assertThat;

import io.nccl4j.launch.Launcher;
import io.nccl4j.testing.TestJob;
import io.nccl4j.testing.TestTime;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.stream.Collectors;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * Ranks as real processes of one host under {@link Launcher}: their AllReduces run through shared
 * memory (one-shot and direct, as between threads), the sweep's bound is memory's, nothing is left in
 * {@code /dev/shm}; a subgroup's too; with {@code NCCL4J_SHM=0} the same sweep runs the ring over TCP.
 */
@Tag("multiprocess")
class SharedMemoryProcessesTest {
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

  /** This test's job: its segments are the only ones it counts. */
  private final TestJob job = TestJob.create("shm-processes");
  /** The most segments of this job seen in /dev/shm while it ran (sampled every 10 ms). */
  private final AtomicInteger segmentsSeen = new AtomicInteger();

  private List<String> launch(Map<String, String> env, String... cliArgs) throws Exception {
    return launch(2, env, cliArgs);
  }

  private List<String> launch(int processes, Map<String, String> extraEnv, String... cliArgs) throws Exception {
    Map<String, String> env = new HashMap<>(extraEnv);
    env.putAll(job.environment());
    List<String> cmd = new ArrayList<>(List.of(Paths.get(System.getProperty("java.home"), "bin", "java").toString(),
        "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true", "-cp",
        System.getProperty("java.class.path"), Cli.class.getName()));
    cmd.addAll(List.of(cliArgs));
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    PrintStream o = new PrintStream(out, true, StandardCharsets.UTF_8);
    Launcher launcher = new Launcher(cmd).nprocPerNode(processes).environment(env).output(o, o);
    CompletableFuture<Integer> run = CompletableFuture.supplyAsync(launcher::run);
    Thread sampler = new Thread(() -> {
      while (!run.isDone()) {
        try {
          segmentsSeen.accumulateAndGet(job.segments().size(), Math::max);
          Thread.sleep(10);
        } catch (IOException | InterruptedException e) {
          return;
        }
      }
    }, "segment-sampler");
    sampler.setDaemon(true);
    sampler.start();
    int status = run.get(TestTime.scaledSeconds(240), TimeUnit.SECONDS);
    sampler.join();
    o.flush();
    List<String> lines = out.toString(StandardCharsets.UTF_8).lines().toList();
    assertThat(status).as(String.join("\n", lines)).isZero();
    return lines;
  }

  @Test
  void twoProcessesAllReduceThroughSharedMemoryAndLeaveNothingBehind() throws Exception {
    List<String> lines = launch(Map.of(), "sweep", "--backend", "cpu", "--op", "allreduce", "-b", "1K", "-e", "1M",
        "-f", "1024", "-n", "2", "-w", "1", "--bound", "--timeout", "60");
    assertThat(lines).as(String.join("\n", lines))
        .contains("[rank 0] # algorithms (out-of-place/in-place): one-shot/one-shot 1024, direct/direct 1048576")
        .anyMatch(l -> l.startsWith("[rank 0] # bound: B = ") && l.contains("copying") && l.endsWith("t >= 2pS / B"))
        .contains("[rank 0] # out-of-bounds values: 0 OK");
    assertThat(segmentsSeen.get()).as("this job's segments seen in /dev/shm while it ran (they carry its id)").isPositive();
    assertThat(job.segments()).as("this job's segments left in /dev/shm").isEmpty();
  }

  @Test
  void withSharedMemoryOffTheSameSweepRunsTheRingOverTcp() throws Exception {
    List<String> lines = launch(Map.of("NCCL4J_SHM", "0"), "sweep", "--backend", "cpu", "--op", "allreduce", "-b",
        "1K", "-e", "1M", "-f", "1024", "-n", "2", "-w", "1", "--bound", "--timeout", "60");
    assertThat(lines).as(String.join("\n", lines))
        .contains("[rank 0] # algorithms (out-of-place/in-place): ring/ring 1024–1048576")
        .anyMatch(l -> l.startsWith("[rank 0] # bound: B = ") && l.contains("TCP") && l.endsWith("t >= 2(p-1)S / B"))
        .contains("[rank 0] # out-of-bounds values: 0 OK");
  }

  /** The payloads through the JDK's socket streams (the path without nccl4j's CPU kernel library): exact as well. */
  @Test
  void withTheJdksSocketStreamsTheRingOverTcpIsExactToo() throws Exception {
    List<String> lines = launch(3, Map.of("NCCL4J_SHM", "0", "NCCL4J_TCP_NATIVE", "0"), "sweep", "--backend", "cpu",
        "--op", "allreduce", "-b", "1K", "-e", "4M", "-f", "64", "-n", "2", "-w", "1", "--timeout", "60");
    assertThat(lines).as(String.join("\n", lines))
        .contains("[rank 0] # algorithms (out-of-place/in-place): ring/ring 1024–4194304")
        .contains("[rank 0] # out-of-bounds values: 0 OK")
        .filteredOn(l -> l.matches("\\[rank 0\\] \\d+ .*")).hasSize(3)
        .allMatch(l -> l.split("\\|")[8].trim().equals("0") && l.split("\\|")[12].trim().equals("0"), "#wrong 0");
  }

  @Test
  void aSubgroupOfProcessesAllReducesThroughSharedMemoryAndLeavesNothingBehind() throws Exception {
    List<String> lines = launch(4, Map.of(), "sweep", "--backend", "cpu", "--group", "1,3", "--op", "allreduce", "-b",
        "1K", "-e", "1M", "-f", "1024", "-n", "2", "-w", "1", "--bound", "--timeout", "60");
    assertThat(lines).as(String.join("\n", lines))
        .contains("[rank 0] # algorithms (out-of-place/in-place): one-shot/one-shot 1024, direct/direct 1048576")
        .contains("[rank 0] # out-of-bounds values: 0 OK");
    assertThat(segmentsSeen.get()).as("this job's segments seen in /dev/shm while it ran (they carry its id)").isPositive();
    assertThat(job.segments()).as("this job's segments left in /dev/shm").isEmpty();
  }
}
