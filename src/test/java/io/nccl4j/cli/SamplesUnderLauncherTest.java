package io.nccl4j.cli;

import static org.assertj.core.api.Assertions.assertThat;

import io.nccl4j.launch.Launcher;
import io.nccl4j.testing.SweepOutput;
import io.nccl4j.testing.TestTime;
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
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * The samples as real processes under {@link Launcher} (CPU backend over TCP): each rank runs
 * {@link Cli}; rank 0 gathers every rank's result and prints the report once. Every process started
 * here is killed after each test.
 */
@Tag("multiprocess")
class SamplesUnderLauncherTest {
  /** The group timeout the command line is given: a guard against a hang, scaled for a busy machine (TestTime). */
  private static final String GUARD_S = Long.toString(TestTime.scaledSeconds(60));
  private Set<Long> before;

  private record Launched(int status, List<String> out, List<String> err) {
    String all() {
      return String.join("\n", out) + "\n--- stderr ---\n" + String.join("\n", err);
    }
  }

  @BeforeEach
  void rememberChildren() {
    before = ProcessHandle.current().descendants().map(ProcessHandle::pid).collect(Collectors.toSet());
  }

  @AfterEach
  void killEverythingStartedHere() {
    ProcessHandle.current().descendants().filter(h -> !before.contains(h.pid()))
        .forEach(ProcessHandle::destroyForcibly);
  }

  private static Launched launch(int procs, String... cliArgs) throws Exception {
    List<String> cmd = new ArrayList<>(List.of(Paths.get(System.getProperty("java.home"), "bin", "java").toString(),
        "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true", "-cp",
        System.getProperty("java.class.path"), Cli.class.getName()));
    cmd.addAll(List.of(cliArgs));
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    ByteArrayOutputStream err = new ByteArrayOutputStream();
    PrintStream o = new PrintStream(out, true, StandardCharsets.UTF_8);
    PrintStream e = new PrintStream(err, true, StandardCharsets.UTF_8);
    Launcher launcher = new Launcher(cmd).nprocPerNode(procs).output(o, e);
    // generous "did not hang" bound; the ranks' own collective timeout is 60 s
    int status = CompletableFuture.supplyAsync(launcher::run).get(TestTime.scaledSeconds(240), TimeUnit.SECONDS);
    o.flush();
    e.flush();
    return new Launched(status, out.toString(StandardCharsets.UTF_8).lines().toList(),
        err.toString(StandardCharsets.UTF_8).lines().toList());
  }

  @Test
  void probeOnTwoProcessesPrintsTheTableOnceFromRankZero() throws Exception {
    Launched l = launch(2, "probe", "--backend", "cpu", "--size", "256K", "--timeout", GUARD_S);
    assertThat(l.status()).as(l.all()).isZero();
    List<String> header = l.out().stream().filter(s -> s.contains("| AllReduce | ReduceScatter |")).toList();
    assertThat(header).as(l.all()).hasSize(1);
    assertThat(header.get(0)).startsWith("[rank 0] range ");
    assertThat(l.out()).noneMatch(s -> s.startsWith("[rank 1] "));
    List<String> direct = l.out().stream().filter(s -> s.startsWith("[rank 0] direct ")).toList();
    List<String> decomposed = l.out().stream().filter(s -> s.startsWith("[rank 0] decomposed ")).toList();
    assertThat(direct).hasSize(1);
    assertThat(decomposed).hasSize(1);
    // the launcher's world size (2), not --world-size's default (4): 5 iterations x 2 ranks
    assertThat(SampleRunner.cells(direct.get(0).substring("[rank 0] ".length())))
        .containsExactly("direct", "10", "0", "0", "10", "10 AllReduce");
    assertThat(SampleRunner.cells(decomposed.get(0).substring("[rank 0] ".length())))
        .containsExactly("decomposed", "0", "10", "10", "20", "10 ReduceScatter + 10 AllGather");
    assertThat(l.out()).contains("[rank 0] API-call counts: as expected",
        "[rank 0] endpoint correctness: direct 0 wrong, decomposed 0 wrong (every element of every rank)");
    assertThat(l.out()).contains("[rank 0] world size 2, 256 KiB float32 per rank, 2 warm-ups outside the ranges, "
        + "5 measured iterations per range");
  }

  @Test
  void benchOnTwoProcessesSucceeds() throws Exception {
    Launched l = launch(2, "bench", "--backend", "cpu", "--sizes", "1K", "--cycles", "2", "--warmups", "1",
        "--timeout", GUARD_S);
    assertThat(l.status()).as(l.all()).isZero();
    assertThat(l.out()).as(l.all()).contains("[rank 0] every element verified every cycle: 0 wrong");
    assertThat(l.out()).contains(
        "[rank 0] world size 2, float32, 1 warm-ups + 2 cycles per size, alternating order, max over ranks");
    assertThat(l.out().stream().filter(s -> s.startsWith("[rank 0] 1 KiB ")).toList()).hasSize(2);
    assertThat(l.out()).noneMatch(s -> s.startsWith("[rank 1] "));
  }

  /** Ranks other than the reporter judge their own rows (they once read rank 0's, which they do not have). */
  @Test
  void theValidationOverheadSweepSucceedsOnEveryProcess() throws Exception {
    Launched l = launch(2, "sweep", "--backend", "cpu", "--validation-overhead", "-b", "1K", "-e", "1K",
        "--rounds", "1", "-n", "2", "-w", "1", "--timeout", GUARD_S);
    assertThat(l.status()).as(l.all()).isZero();
    assertThat(l.out()).as(l.all()).anyMatch(s -> s.startsWith("[rank 0] # validation overhead: allreduce, 2 ranks"));
    assertThat(l.out()).noneMatch(s -> s.startsWith("[rank 1] "));
  }

  /** World rank 0 outside the subgroup has no rows of its own and still reports the members'. */
  @Test
  void aSweepOnASubgroupWithoutRankZeroIsReportedByRankZero() throws Exception {
    Launched l = launch(3, "sweep", "--backend", "cpu", "--group", "1,2", "-b", "1K", "-e", "1K", "-n", "2", "-w", "1",
        "--timeout", GUARD_S);
    assertThat(l.status()).as(l.all()).isZero();
    assertThat(l.out()).as(l.all())
        .anyMatch(s -> s.startsWith("[rank 0] # allreduce, 2 ranks (group [1, 2] (2 ranks) of world size 3)"));
    SweepOutput rank0 = SweepOutput.of(l.out(), 0);
    assertThat(rank0.outOfBounds()).as(l.all()).isZero();
    assertThat(rank0.wrong()).as(l.all()).containsOnlyKeys(1024L).allSatisfy((size, wrong) ->
        assertThat(wrong).containsOnly(0L));
  }
}
