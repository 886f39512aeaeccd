package io.nccl4j.cli;

import static org.assertj.core.api.Assertions.assertThat;

import io.nccl4j.CollectiveMismatchException;
import io.nccl4j.CollectiveTimeoutException;
import io.nccl4j.PeerFailureException;
import io.nccl4j.RankFailedException;
import io.nccl4j.UsageException;
import io.nccl4j.cli.bench.SampleException;
import io.nccl4j.TransportTimeoutException;
import io.nccl4j.launch.Launcher;
import io.nccl4j.store.StoreTimeoutException;
import io.nccl4j.testing.TestTime;
import java.util.List;
import java.util.concurrent.Callable;
import java.util.function.Supplier;
import java.util.stream.Stream;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;
import picocli.CommandLine.Command;
import picocli.CommandLine;

/**
 * The CLI's exit codes — 0 ok, 1 a wrong result, 2 usage or setup, 3 a failed or timed-out
 * collective — and its errors: one line on standard error, {@code nccl4j: …}, with the stack trace
 * only under {@code --verbose}. Each path is taken by a real command: picocli's parse errors, a
 * command that throws (the CLI's commands, with a test command added for each kind of failure),
 * and {@code run}, whose status is its failed rank's.
 */
@Tag("multirank")
class CliExitCodesTest {
  /** The group timeout the command line is given: a guard against a hang, scaled for a busy machine (TestTime). */
  private static final String GUARD_S = Long.toString(TestTime.scaledSeconds(60));
  /** A command that throws what the test gives it, as a sample's collective would. */
  @Command(name = "fails")
  static final class Fails implements Callable<Integer> {
    private final Supplier<RuntimeException> failure;

    Fails(Supplier<RuntimeException> failure) {
      this.failure = failure;
    }

    @Override
    public Integer call() {
      throw failure.get();
    }
  }

  private static CapturedRun execute(Supplier<RuntimeException> failure, String... args) {
    return CapturedRun.of(() -> {
      CommandLine cl = new CommandLine(new Cli());
      if (failure != null) {
        cl.addSubcommand("fails", new Fails(failure));
      }
      return Cli.execute(cl, args);
    });
  }

  private static List<String> errLines(CapturedRun r) {
    return r.err().lines().toList();
  }

  static Stream<Arguments> failures() {
    return Stream.of(
        Arguments.of(3, "PeerFailureException: rank 2 failed: IllegalStateException: boom",
            (Supplier<RuntimeException>) () -> new PeerFailureException(2, "rank 2 failed: IllegalStateException: boom")),
        Arguments.of(3, "RankFailedException: rank 1 failed: io.nccl4j.CollectiveTimeoutException: Watchdog caught",
            (Supplier<RuntimeException>) () -> new RankFailedException(1,
                new CollectiveTimeoutException("Watchdog caught", 1))),
        Arguments.of(3, "CollectiveMismatchException: rank 0 is running ALLREDUCE but rank 1 is running BROADCAST",
            (Supplier<RuntimeException>) () -> new CollectiveMismatchException(
                "rank 0 is running ALLREDUCE but rank 1 is running BROADCAST")),
        Arguments.of(3, "StoreTimeoutException: rank 0: rank 1 of 2 did not arrive within 2000 ms",
            (Supplier<RuntimeException>) () -> new StoreTimeoutException(
                "rank 0: rank 1 of 2 did not arrive within 2000 ms")),
        Arguments.of(3, "IllegalStateException: the store is gone",
            (Supplier<RuntimeException>) () -> new IllegalStateException("the store is gone",
                new TransportTimeoutException("waiting for rank 1"))),
        Arguments.of(1, "2 of 5 contracts failed",
            (Supplier<RuntimeException>) () -> new SampleException(1, "2 of 5 contracts failed")),
        Arguments.of(2, "UsageException: invalid root rank: 5 (valid ranks are 0..3)",
            (Supplier<RuntimeException>) () -> new UsageException("invalid root rank: 5", "valid ranks are 0..3")),
        Arguments.of(2, "IllegalStateException: no free TCP port: a two-line reason, second line",
            (Supplier<RuntimeException>) () -> new IllegalStateException("no free TCP port: a two-line reason,\n"
                + "  second line")));
  }

  @ParameterizedTest(name = "{0}: {1}")
  @MethodSource("failures")
  void aCommandThatThrowsExitsWithItsCodeAndOneLine(int code, String line, Supplier<RuntimeException> failure) {
    CapturedRun e = execute(failure, "fails");
    assertThat(e.code()).as(e.err()).isEqualTo(code);
    assertThat(errLines(e)).containsExactly("nccl4j: " + line);
  }

  @Test
  void verbosePrintsTheStackTraceAfterTheLine() {
    Supplier<RuntimeException> f = () -> new PeerFailureException(2, "rank 2 failed: IllegalStateException: boom");
    CapturedRun before = execute(f, "--verbose", "fails");
    CapturedRun after = execute(f, "fails", "--verbose");
    for (CapturedRun e : List.of(before, after)) {
      assertThat(e.code()).isEqualTo(3);
      assertThat(errLines(e).get(0)).isEqualTo("nccl4j: PeerFailureException: rank 2 failed: IllegalStateException:"
          + " boom");
      assertThat(errLines(e)).anyMatch(s -> s.startsWith("\tat "));
    }
    assertThat(execute(f, "fails").err()).doesNotContain("\tat ");
  }

  @Test
  void aBadOptionIsOneUsageLineAndExitsTwo() {
    CapturedRun e = execute(null, "contracts", "--no-such-option");
    assertThat(e.code()).isEqualTo(2);
    assertThat(errLines(e)).containsExactly("nccl4j: Unknown option: '--no-such-option' (see 'nccl4j contracts"
        + " --help')");
    CapturedRun missing = execute(null, "run");
    assertThat(missing.code()).isEqualTo(2);
    assertThat(errLines(missing)).hasSize(1);
    assertThat(errLines(missing).get(0)).startsWith("nccl4j: Missing required option: '--nproc-per-node=N'");
  }

  @Test
  void aRealCommandThatPassesExitsZeroAndPrintsNoError() {
    CapturedRun e = execute(null, "contracts", "--world-size", "2", "--timeout", GUARD_S);
    assertThat(e.code()).as(e.out() + e.err()).isZero();
    assertThat(e.err()).isEmpty();
  }

  /** Every rank of a launched job that fails prints one line; {@code run} exits with the failed rank's code. */
  @Test
  @Tag("multiprocess")
  void runExitsThreeWhenARankCannotCompleteItsCollective() {
    // Node 1 never comes: rank 0's first collective gives up waiting for rank 1 after the 2 s timeout.
    int port = Launcher.freePort();
    CapturedRun e = execute(null, "run", "--nnodes", "2", "--node-rank", "0", "--nproc-per-node", "1",
        "--master-port", Integer.toString(port), "--", "demo", "--timeout", "2");
    assertThat(e.code()).as(e.out() + e.err()).isEqualTo(3);
    // The facts, not the watchdog's or the launcher's wording: rank 0's one line names the exception, the rank it
    // waited for and the collective; the launcher names rank 0, its status 3 and the exception.
    assertThat(errLines(e)).as(e.err()).anyMatch(s -> s.startsWith("[rank 0] nccl4j: CollectiveTimeoutException: ")
        && s.contains("rank 1") && s.contains("ALLREDUCE #1"));
    assertThat(errLines(e)).as(e.err()).noneMatch(s -> s.contains("\tat "));
    assertThat(errLines(e)).as(e.err()).anyMatch(s -> s.startsWith("nccl4j run: ") && s.contains("rank 0")
        && s.contains("status 3") && s.contains("CollectiveTimeoutException"));
  }

  @Test
  @Tag("multiprocess")
  void runMapsARankKilledBySignalToThreeAndPassesTheCliCodesThrough() {
    // The ranks get the library's class path and --classpath only: the test classes come through the latter.
    CapturedRun killed = execute(null, "run", "--nproc-per-node", "2", "--class",
        "io.nccl4j.launch.RankMains$Rank1KillsItself", "--classpath", System.getProperty("nccl4j.test.classes"));
    assertThat(killed.code()).as(killed.err()).isEqualTo(3);
    assertThat(errLines(killed)).as(killed.err()).anyMatch(s -> s.startsWith("nccl4j run: ") && s.contains("rank 1")
        && s.contains("signal 9") && s.contains("SIGKILL"));
  }

  /**
   * A rank given a world no job has (WORLD_SIZE=2147483647): one line naming the variable and exit 2, before it
   * hosts or joins anything — once a java.lang.OutOfMemoryError from the shared-memory set-up's per-rank table.
   */
  @Test
  @Tag("multiprocess")
  void aWorldLargerThanAnyJobIsAUsageErrorNamingTheVariableNotAnOutOfMemoryError() throws Exception {
    ProcessBuilder pb = new ProcessBuilder(java.nio.file.Paths.get(System.getProperty("java.home"), "bin", "java")
        .toString(), "-Xmx256m", "-XX:+UseSerialGC", "-cp", System.getProperty("java.class.path"),
        Cli.class.getName(), "contracts", "--backend", "cpu").redirectErrorStream(true);
    java.util.Map<String, String> env = pb.environment();
    List.of("LOCAL_RANK", "LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "PMI_RANK", "PMI_SIZE",
        "SLURM_PROCID", "SLURM_NTASKS", "PET_NODE_RANK", "PET_NNODES", "NCCL4J_LAUNCHER_PID").forEach(env::remove);
    env.putAll(java.util.Map.of("RANK", "0", "WORLD_SIZE", "2147483647", "MASTER_ADDR", "127.0.0.1", "MASTER_PORT",
        Integer.toString(Launcher.freePort())));
    Process p = pb.start();
    String out;
    try {
      out = new String(p.getInputStream().readAllBytes(), java.nio.charset.StandardCharsets.UTF_8);
      assertThat(p.waitFor(io.nccl4j.testing.TestTime.scaledSeconds(120), java.util.concurrent.TimeUnit.SECONDS))
          .as(out).isTrue();
    } finally {
      p.destroyForcibly();
    }
    assertThat(p.exitValue()).as(out).isEqualTo(2);
    assertThat(out).contains("nccl4j: the launcher's environment: WORLD_SIZE must be in 1..1048576, got 2147483647:"
        + " more ranks than any job has").doesNotContain("OutOfMemoryError");
  }
}
