package io.nccl4j.cli;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.entry;
import static org.assertj.core.api.Assertions.within;

import io.nccl4j.launch.Launcher;
import io.nccl4j.testing.SweepOutput;
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
  /** The group timeout the command line is given: a guard against a hang, scaled for a busy machine (TestTime). */
  private static final String GUARD_S = Long.toString(TestTime.scaledSeconds(60));
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
          Thread.sleep(10); // kept: the sampling period of what the job has in /dev/shm while it runs
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
    // The one test of --bound between processes through shared memory: B is memory's, each row's bound 2pS / B.
    List<String> lines = launch(Map.of(), "sweep", "--backend", "cpu", "--op", "allreduce", "-b", "1K", "-e", "1M",
        "-f", "1024", "-n", "2", "-w", "1", "--bound", "--timeout", GUARD_S);
    SweepOutput rank0 = SweepOutput.of(lines, 0);
    assertThat(rank0.algorithms()).as(rank0.text())
        .containsExactly(entry("1024", "one-shot/one-shot"), entry("1048576", "direct/direct"));
    assertThat(rank0.outOfBounds()).as(rank0.text()).isZero();
    assertThat(rank0.wrong()).as(rank0.text()).containsOnlyKeys(1024L, 1048576L).allSatisfy((size, wrong) ->
        assertThat(wrong).containsOnly(0L));
    assertThat(rank0.boundLine()).as(rank0.text()).contains("copying");
    assertBounds(rank0, 2 * 2);
    assertThat(segmentsSeen.get()).as("this job's segments seen in /dev/shm while it ran (they carry its id)").isPositive();
    assertThat(job.segments()).as("this job's segments left in /dev/shm").isEmpty();
  }

  @Test
  void withSharedMemoryOffTheSameSweepRunsTheRingOverTcp() throws Exception {
    // The one test of --bound between processes over TCP: B is loopback TCP's, each row's bound 2(p-1)S / B.
    List<String> lines = launch(Map.of("NCCL4J_SHM", "0"), "sweep", "--backend", "cpu", "--op", "allreduce", "-b",
        "1K", "-e", "1M", "-f", "1024", "-n", "2", "-w", "1", "--bound", "--timeout", GUARD_S);
    SweepOutput rank0 = SweepOutput.of(lines, 0);
    assertThat(rank0.algorithms()).as(rank0.text()).containsExactly(entry("1024–1048576", "ring/ring"));
    assertThat(rank0.outOfBounds()).as(rank0.text()).isZero();
    assertThat(rank0.wrong()).as(rank0.text()).containsOnlyKeys(1024L, 1048576L).allSatisfy((size, wrong) ->
        assertThat(wrong).containsOnly(0L));
    assertThat(rank0.boundLine()).as(rank0.text()).contains("TCP");
    assertBounds(rank0, 2 * (2 - 1));
  }

  /**
   * Each row's bound is {@code factor}·S / B in microseconds. B is printed to 0.01 GB/s (the command used it
   * unrounded) and the bound to 0.01 us: within B's rounding (at least 1 %) and one printed digit.
   */
  private static void assertBounds(SweepOutput s, int factor) {
    double gbps = s.bandwidth();
    assertThat(gbps).as(s.text()).isPositive();
    double rounding = Math.max(0.01, 0.006 / gbps);
    assertThat(s.bounds()).as(s.text()).isNotEmpty().allSatisfy((bytes, micros) -> {
      double expected = factor * bytes / (gbps * 1e3);
      assertThat(micros).as("the bound of %d bytes: %d·S / B with B = %s GB/s", bytes, factor, gbps)
          .isCloseTo(expected, within(expected * rounding + 0.006));
    });
  }

  /** The payloads through the JDK's socket streams (the path without nccl4j's CPU kernel library): exact as well. */
  @Test
  void withTheJdksSocketStreamsTheRingOverTcpIsExactToo() throws Exception {
    List<String> lines = launch(3, Map.of("NCCL4J_SHM", "0", "NCCL4J_TCP_NATIVE", "0"), "sweep", "--backend", "cpu",
        "--op", "allreduce", "-b", "1K", "-e", "4M", "-f", "64", "-n", "2", "-w", "1", "--timeout", GUARD_S);
    SweepOutput rank0 = SweepOutput.of(lines, 0);
    assertThat(rank0.algorithms()).as(rank0.text()).containsExactly(entry("1024–4194304", "ring/ring"));
    assertThat(rank0.outOfBounds()).as(rank0.text()).isZero();
    assertThat(rank0.wrong()).as(rank0.text()).containsOnlyKeys(1024L, 65536L, 4194304L).allSatisfy((size, wrong) ->
        assertThat(wrong).as("#wrong of %d bytes", size).containsOnly(0L));
  }

  @Test
  void aSubgroupOfProcessesAllReducesThroughSharedMemoryAndLeavesNothingBehind() throws Exception {
    // Without --bound: it proves the values, and the bound between processes is the test above's.
    List<String> lines = launch(4, Map.of(), "sweep", "--backend", "cpu", "--group", "1,3", "--op", "allreduce", "-b",
        "1K", "-e", "1M", "-f", "1024", "-n", "2", "-w", "1", "--timeout", GUARD_S);
    SweepOutput rank0 = SweepOutput.of(lines, 0);
    assertThat(rank0.algorithms()).as(rank0.text())
        .containsExactly(entry("1024", "one-shot/one-shot"), entry("1048576", "direct/direct"));
    assertThat(rank0.outOfBounds()).as(rank0.text()).isZero();
    assertThat(segmentsSeen.get()).as("this job's segments seen in /dev/shm while it ran (they carry its id)").isPositive();
    assertThat(job.segments()).as("this job's segments left in /dev/shm").isEmpty();
  }
}
