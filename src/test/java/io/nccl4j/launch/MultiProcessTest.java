package io.nccl4j.launch;

import static org.assertj.core.api.Assertions.assertThat;

import io.nccl4j.testing.TestTime;
import io.nccl4j.testing.Waits;
import java.io.ByteArrayOutputStream;
import java.io.File;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Collectors;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Real JVMs as ranks: the {@link Launcher} (in this JVM, or the {@code run} command in a child JVM)
 * and processes started here directly. The rank programs are {@link RankMains}. Bounds such as
 * "within 30 s" only prove that nothing waited for the 60 s group timeout (both scaled by TestTime, in the
 * ranks too); every process started here, and every descendant the launcher started, is killed after each test.
 */
@Tag("multiprocess")
class MultiProcessTest {
  private static final Duration GUARD = TestTime.seconds(240);
  /** The group timeout given to the command line's ranks: a guard, scaled. */
  private static final String CLI_TIMEOUT = Long.toString(TestTime.scaledSeconds(60));
  private static final String[] CONTRACT_NAMES = {"exact-sum-equivalence", "wrong-shard-order-rejected",
      "wrong-reduction-op-rejected", "padding-and-trim-equivalence", "nondivisible-without-padding-rejected"};

  @TempDir
  Path tmp;

  private ChildJvms children;

  @BeforeEach
  void rememberChildren() {
    children = new ChildJvms();
  }

  @AfterEach
  void killEverythingStartedHere() {
    children.killAll();
  }

  // ------------------------------------------------------------------ helpers

  private static List<String> jvm(String classpath) {
    return ChildJvms.jvm(classpath);
  }

  private static List<String> javaCommand(Class<?> main, String... args) {
    return ChildJvms.javaCommand(main, args);
  }

  /** The directory this class was loaded from (target/test-classes). */
  private static String testClassesDir() throws Exception {
    return Paths.get(RankMains.class.getProtectionDomain().getCodeSource().getLocation().toURI()).toString();
  }

  /** Output of one launcher run in this JVM. */
  private record Launched(int status, List<String> out, List<String> err, Duration took) {}

  private static Launched launch(Launcher launcher) throws Exception {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    ByteArrayOutputStream err = new ByteArrayOutputStream();
    PrintStream o = new PrintStream(out, true, StandardCharsets.UTF_8);
    PrintStream e = new PrintStream(err, true, StandardCharsets.UTF_8);
    launcher.output(o, e);
    long start = System.nanoTime();
    int status = CompletableFuture.supplyAsync(launcher::run).get(GUARD.toSeconds(), TimeUnit.SECONDS);
    Duration took = Duration.ofNanos(System.nanoTime() - start);
    o.flush();
    e.flush();
    return new Launched(status, out.toString(StandardCharsets.UTF_8).lines().toList(),
        err.toString(StandardCharsets.UTF_8).lines().toList(), took);
  }

  private Process start(ProcessBuilder pb) throws IOException {
    return children.start(pb);
  }

  /** Waits until none of {@code pids} is alive, under {@code within} × the factor; fails naming {@code what}. */
  private static void awaitGone(String what, List<Long> pids, Duration within) {
    Waits.await(what + ": processes " + pids + " gone", within).until(() -> pids.stream().noneMatch(ChildJvms::alive));
  }

  /** A table line's cells, trimmed. */
  private static List<String> cells(String line) {
    return Arrays.stream(line.split("\\|", -1)).map(String::trim).toList();
  }

  // ------------------------------------------------------------------ the launcher

  @Test
  void launcherSetsTheVariablesAndPrefixesEveryLine() throws Exception {
    int port = Launcher.freePort();
    Launched l = launch(new Launcher(javaCommand(RankMains.PrintEnv.class, "a", "b c")).nprocPerNode(3)
        .master("127.0.0.1", port));
    assertThat(l.status()).isZero();
    for (int r = 0; r < 3; r++) {
      assertThat(l.out()).contains("[rank " + r + "] env MASTER_ADDR=127.0.0.1 MASTER_PORT=" + port + " RANK=" + r
          + " WORLD_SIZE=3 LOCAL_RANK=" + r + " LOCAL_WORLD_SIZE=3 GROUP_RANK=0 EXTRA=null args=[a, b c]");
      assertThat(l.err()).contains("[rank " + r + "] to stderr from " + r);
    }
    assertThat(l.out()).hasSize(3);
  }

  @Test
  void secondNodeOfTwoGetsTheUpperRanks() throws Exception {
    int port = Launcher.freePort();
    Launched l = launch(new Launcher(javaCommand(RankMains.PrintEnv.class)).nprocPerNode(2).nodes(2, 1)
        .master("10.9.8.7", port).environment(Map.of("NCCL4J_TEST_EXTRA", "yes")));
    assertThat(l.status()).isZero();
    assertThat(l.out()).containsExactlyInAnyOrder(
        "[rank 2] env MASTER_ADDR=10.9.8.7 MASTER_PORT=" + port
            + " RANK=2 WORLD_SIZE=4 LOCAL_RANK=0 LOCAL_WORLD_SIZE=2 GROUP_RANK=1 EXTRA=yes args=[]",
        "[rank 3] env MASTER_ADDR=10.9.8.7 MASTER_PORT=" + port
            + " RANK=3 WORLD_SIZE=4 LOCAL_RANK=1 LOCAL_WORLD_SIZE=2 GROUP_RANK=1 EXTRA=yes args=[]");
  }

  @Test
  void contractsOnFourProcessesReportedOnceByRankZero() throws Exception {
    Launched l = launch(new Launcher(javaCommand(io.nccl4j.cli.Cli.class, "contracts", "--backend", "cpu",
        "--timeout", CLI_TIMEOUT)).nprocPerNode(4));
    assertThat(l.status()).as("stderr: %s", l.err()).isZero();
    List<String> out = l.out();
    // The facts rank 0 reports, not the command's wording (CliTest holds that): the backend, the world size and
    // counts, each contract's row passed on 4 ranks, the totals once.
    List<String> rank0 = out.stream().filter(s -> s.startsWith("[rank 0] ")).map(s -> s.substring(9)).toList();
    assertThat(rank0).as("%s", out).anyMatch(s -> s.contains("backend") && s.contains("cpu"))
        .anyMatch(s -> s.contains("world size 4") && s.contains("int64") && s.contains("20") && s.contains("1003"));
    for (String name : CONTRACT_NAMES) {
      assertThat(rank0).as("%s", out).anyMatch(s -> cells(s).equals(List.of(name, "4", "PASS")));
    }
    assertThat(rank0.stream().filter(s -> s.matches(".*\\b20 passed, 0 failed\\b.*")).count()).as("%s", out)
        .isEqualTo(1);
    assertThat(out).allSatisfy(s -> assertThat(s).startsWith("[rank "));
    assertThat(out).filteredOn(s -> !s.startsWith("[rank 0] ")).noneMatch(s -> s.contains("passed"));
    assertThat(out).filteredOn(s -> !s.startsWith("[rank 0] ")).noneMatch(s -> s.contains("PASS"));
  }

  @Test
  void equivalenceOnFourProcessesReportedOnceByRankZero() throws Exception {
    Launched l = launch(new Launcher(javaCommand(io.nccl4j.cli.Cli.class, "equivalence", "--backend", "cpu",
        "--timeout", CLI_TIMEOUT)).nprocPerNode(4));
    assertThat(l.status()).as("stderr: %s", l.err()).isZero();
    List<String> out = l.out();
    assertThat(out.stream().filter(s -> s.equals("[rank 0] AllReduce = ReduceScatter + AllGather: true")).count())
        .isEqualTo(1);
    assertThat(out).contains("[rank 0] World size: 4", "[rank 0] Elements per rank: 16");
    for (int r = 0; r < 4; r++) {
      assertThat(out).contains("[rank 0] [Rank " + r + "] equal: true, matches p·i + S·p(p−1)/2: true");
    }
    assertThat(out).filteredOn(s -> !s.startsWith("[rank 0] ")).isEmpty();
  }

  @Test
  void twoGroupsInTurnInEveryProcess() throws Exception {
    Launched l = launch(new Launcher(javaCommand(RankMains.TwoGroups.class)).nprocPerNode(3));
    assertThat(l.status()).as("stderr: %s", l.err()).isZero();
    // Inputs 100(r+1)+i summed over 3 ranks: 600+3i; summed again: 3·(600+3i).
    for (int r = 0; r < 3; r++) {
      assertThat(l.out()).contains("[rank " + r + "] rank " + r + " first [1800, 1809, 1818] second [3, 30]");
    }
  }

  @Test
  void runCommandExitsWithTheFailingRanksStatus() throws Exception {
    List<String> cmd = jvm(System.getProperty("java.class.path"));
    cmd.addAll(List.of(io.nccl4j.cli.Cli.class.getName(), "run", "--nproc-per-node", "4", "--class",
        RankMains.Rank2ExitsWith3.class.getName(), "--classpath", testClassesDir(), "--", "x"));
    Path log = tmp.resolve("run.txt");
    Process p = start(new ProcessBuilder(cmd).redirectErrorStream(true).redirectOutput(log.toFile()));
    assertThat(p.waitFor(GUARD.toSeconds(), TimeUnit.SECONDS)).isTrue();
    List<String> out = Files.readAllLines(log);
    assertThat(p.exitValue()).as("output: %s", out).isEqualTo(3);
    assertThat(out).contains("nccl4j run: failed: rank 2 exited with status 3");
  }

  @Test
  void rankExitingNonZeroStopsTheOthersAndNamesIt() throws Exception {
    Launched l = launch(new Launcher(javaCommand(RankMains.Rank2ExitsWith3.class)).nprocPerNode(4)
        .grace(Duration.ofSeconds(5)));
    assertThat(l.status()).isEqualTo(3);
    assertThat(l.took()).as("the others were stopped, not waited for").isLessThan(TestTime.seconds(30));
    assertThat(l.out()).contains("[rank 2] rank 2 leaving with status 3");
    assertThat(l.err()).contains("nccl4j run: rank 2 exited with status 3; stopping the other ranks");
    assertThat(l.err()).contains("nccl4j run: failed: rank 2 exited with status 3");
    assertThat(l.out()).noneMatch(s -> s.contains("all-reduce returned"));
  }

  @Test
  void aRankThatIgnoresSigtermIsKilledAfterTheGracePeriod() throws Exception {
    Path marker = tmp.resolve("rank1-ready");
    Launched l = launch(new Launcher(javaCommand(RankMains.Rank1IgnoresSigterm.class, marker.toString()))
        .nprocPerNode(2).grace(Duration.ofSeconds(1)));
    assertThat(l.status()).isEqualTo(1);
    assertThat(l.took()).as("SIGKILL after the 1 s grace, not the rank's 300 s").isLessThan(TestTime.seconds(30));
    assertThat(l.out()).contains("[rank 0] rank 0 fails now");
    assertThat(l.err()).contains("nccl4j run: failed: rank 0 exited with status 1");
    long pid = l.out().stream().filter(s -> s.startsWith("[rank 1] pid ")).map(s -> Long.parseLong(s.substring(13)))
        .findFirst().orElseThrow();
    awaitGone("rank 1 killed after the grace", List.of(pid), Duration.ofSeconds(10));
  }

  @Test
  void rankKilledBySigkillIsReportedWithTheSignal() throws Exception {
    Launched l = launch(new Launcher(javaCommand(RankMains.Rank1KillsItself.class)).nprocPerNode(3));
    assertThat(l.status()).isEqualTo(137);
    assertThat(l.took()).isLessThan(TestTime.seconds(60));
    assertThat(l.out()).anyMatch(s -> s.startsWith("[rank 1] rank 1 pid ") && s.endsWith(" sends itself SIGKILL"));
    assertThat(l.err()).contains("nccl4j run: failed: rank 1 was killed by signal 9 (SIGKILL)");
  }

  @Test
  void masterPortZeroPicksAFreePortAndTwoLaunchesInARowSucceed() throws Exception {
    List<String> ports = new ArrayList<>();
    for (int attempt = 0; attempt < 2; attempt++) {
      List<String> cmd = jvm(System.getProperty("java.class.path"));
      cmd.addAll(List.of(io.nccl4j.cli.Cli.class.getName(), "run", "--nproc-per-node", "2", "--master-port", "0",
          "--class", RankMains.AllReduce.class.getName(), "--classpath", testClassesDir(), "--"));
      cmd.add("unused");
      Process p = start(new ProcessBuilder(cmd).redirectErrorStream(true)
          .redirectOutput(tmp.resolve("launch" + attempt + ".txt").toFile()));
      assertThat(p.waitFor(GUARD.toSeconds(), TimeUnit.SECONDS)).isTrue();
      List<String> out = Files.readAllLines(tmp.resolve("launch" + attempt + ".txt"));
      assertThat(p.exitValue()).as("output: %s", out).isZero();
      String port = null;
      for (int r = 0; r < 2; r++) {
        Pattern line = Pattern.compile("\\[rank " + r + "\\] source=torchrun rank=" + r
            + " size=2 localRank=" + r + " localSize=2 port=(\\d+) result=\\[300, 302, 304, 306, 308, 310\\]");
        Matcher m = out.stream().map(line::matcher).filter(Matcher::matches).findFirst().orElse(null);
        assertThat(m).as("rank %d line in %s", r, out).isNotNull();
        if (port == null) {
          port = m.group(1);
        }
        assertThat(m.group(1)).as("same port on every rank").isEqualTo(port);
      }
      assertThat(Integer.parseInt(port)).isBetween(1, 65535);
      ports.add(port);
    }
    assertThat(ports).hasSize(2);
  }

  @ParameterizedTest(name = "SIG{0}")
  @ValueSource(strings = {"TERM", "INT"})
  void signalToTheLauncherReachesEveryRank(String signal) throws Exception {
    String testClasses = testClassesDir();
    // The launcher's own classpath lacks the test classes: --classpath must supply them.
    String cp = Arrays.stream(System.getProperty("java.class.path").split(File.pathSeparator))
        .filter(e -> !Paths.get(e).toAbsolutePath().toString().equals(Paths.get(testClasses).toAbsolutePath().toString()))
        .collect(Collectors.joining(File.pathSeparator));
    List<String> cmd = new ArrayList<>();
    // A process started in the background by a non-interactive shell (a CI runner's, `mvn … &`) inherits SIGINT as
    // ignored, and a JVM keeps an ignored SIGINT ignored: the launcher would never see the signal under test. The
    // launcher starts with SIGINT's default disposition where env can give it (coreutils 8.31+; env execs, so the pid
    // is the launcher's).
    if (envResetsSignals()) {
      cmd.addAll(List.of("env", "--default-signal=INT"));
    }
    cmd.addAll(jvm(cp));
    cmd.addAll(List.of(io.nccl4j.cli.Cli.class.getName(), "run", "--nproc-per-node", "2", "--class",
        RankMains.PrintPidAndSleep.class.getName(), "--classpath", testClasses, "--", "300"));
    Process launcher = start(new ProcessBuilder(cmd).redirectErrorStream(true));
    BlockingQueue<String> lines = ChildJvms.lines(launcher);
    List<Long> pids = new ArrayList<>();
    Set<Integer> ranks = new HashSet<>();
    Pattern pidLine = Pattern.compile("\\[rank ([01])\\] pid (\\d+)");
    List<String> seen = new ArrayList<>();
    long until = System.nanoTime() + TestTime.seconds(120).toNanos();
    while (pids.size() < 2 && System.nanoTime() < until) {
      String line = lines.poll(1, TimeUnit.SECONDS);
      if (line == null) {
        continue;
      }
      seen.add(line);
      Matcher m = pidLine.matcher(line);
      if (m.matches()) {
        ranks.add(Integer.parseInt(m.group(1)));
        pids.add(Long.parseLong(m.group(2)));
      }
    }
    try {
      assertThat(ranks).as("lines: %s", seen).containsExactlyInAnyOrder(0, 1);
      assertThat(pids).allSatisfy(pid -> assertThat(ChildJvms.alive(pid)).isTrue());
      if (signal.equals("TERM")) {
        launcher.destroy();
      } else {
        new ProcessBuilder("kill", "-INT", Long.toString(launcher.pid())).start().waitFor();
      }
      awaitGone("the ranks after SIG" + signal, pids, Duration.ofSeconds(20));
      assertThat(launcher.waitFor(TestTime.scaledSeconds(20), TimeUnit.SECONDS)).isTrue();
      assertThat(launcher.exitValue()).isNotZero();
    } finally {
      for (long pid : pids) {
        ProcessHandle.of(pid).ifPresent(ProcessHandle::destroyForcibly);
      }
      launcher.destroyForcibly();
    }
  }

  /** Whether this machine's {@code env} can reset a signal to its default disposition before it execs. */
  private static boolean envResetsSignals() {
    try {
      Process p = new ProcessBuilder("env", "--default-signal=INT", "true").redirectErrorStream(true)
          .redirectOutput(ProcessBuilder.Redirect.DISCARD).start();
      return p.waitFor(TestTime.scaledSeconds(20), TimeUnit.SECONDS) && p.exitValue() == 0;
    } catch (java.io.IOException e) {
      return false;
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return false;
    }
  }

  // ------------------------------------------------------------------ processes started here

  private static ProcessBuilder rank(List<String> cmd, Map<String, String> vars, Path output) {
    return ChildJvms.rank(cmd, vars).redirectOutput(output.toFile());
  }

  /**
   * Starts the two {@link RankMains.PeerDies} ranks here (no launcher to stop the survivor) and
   * returns the line where rank 0 reports the exception its second all-reduce threw.
   */
  /** Over TCP (shared memory off): what the sockets tell. */
  private String peerDies(String when) throws Exception {
    return peerDies(when, false);
  }

  private String peerDies(String when, boolean sharedMemory) throws Exception {
    int port = Launcher.freePort();
    List<Process> ps = new ArrayList<>();
    for (int r = 0; r < 2; r++) {
      ps.add(start(rank(javaCommand(RankMains.PeerDies.class, when),
          Map.of("MASTER_ADDR", "127.0.0.1", "MASTER_PORT", Integer.toString(port), "RANK", Integer.toString(r),
              "WORLD_SIZE", "2", "NCCL4J_SHM", sharedMemory ? "1" : "0"), tmp.resolve(when + "-rank" + r + ".txt"))));
    }
    try {
      assertThat(ps.get(1).waitFor(TestTime.scaledSeconds(120), TimeUnit.SECONDS)).as("rank 1 died").isTrue();
      long rank1Gone = System.nanoTime();
      boolean rank0Done = ps.get(0).waitFor(TestTime.scaledSeconds(30), TimeUnit.SECONDS);
      List<String> out0 = Files.readAllLines(tmp.resolve(when + "-rank0.txt"));
      List<String> out1 = Files.readAllLines(tmp.resolve(when + "-rank1.txt"));
      assertThat(rank0Done).as("rank 0 output: %s", out0).isTrue();
      // Well within the 60 s group timeout: detected by the transport.
      assertThat(Duration.ofNanos(System.nanoTime() - rank1Gone)).isLessThan(TestTime.seconds(20));
      assertThat(ps.get(1).exitValue()).as("rank 1 output: %s", out1).isEqualTo(137);
      assertThat(out1).contains("rank 1 first all-reduce [300, 302, 304, 306, 308, 310, 312, 314]");
      assertThat(ps.get(0).exitValue()).as("rank 0 output: %s", out0).isZero();
      assertThat(out0).contains("rank 0 first all-reduce [300, 302, 304, 306, 308, 310, 312, 314]");
      String caught = out0.stream().filter(s -> s.startsWith("caught ")).findFirst().orElse(null);
      assertThat(caught).as("rank 0 output: %s", out0).isNotNull();
      assertThat(caught).startsWith("caught io.nccl4j.PeerFailureException: ").contains("rank 1");
      return caught;
    } finally {
      ps.forEach(Process::destroyForcibly);
    }
  }

  @Test
  void peerDeadBeforeTheNextCollectiveFailsItNamingThePeer() throws Exception {
    assertThat(peerDies("idle")).contains("connection closed by peer");
  }

  @Test
  void peerDyingDuringACollectiveFailsItNamingThePeer() throws Exception {
    peerDies("pending");
  }

  @Test
  void peerDyingDuringACollectiveThroughSharedMemoryFailsItNamingThePeersDeath() throws Exception {
    assertThat(peerDies("pending", true)).contains("rank 1 (pid ").contains(") died while rank 0 was waiting");
  }

  @Test
  void peerDyingDuringACollectiveSaysConnectionClosedByPeer() throws Exception {
    // Rank 1 dies with rank 0's unread data in its socket, so its kernel answers with a reset:
    // actual "caught io.nccl4j.PeerFailureException: rank 0: Connection reset: rank 1 (/127.0.0.1:…)".
    assertThat(peerDies("pending")).contains("connection closed by peer");
  }

  @Test
  void openMpiVariablesInAForkedTwoProcessJob() throws Exception {
    int port = Launcher.freePort();
    List<Process> ps = new ArrayList<>();
    for (int r = 0; r < 2; r++) {
      ps.add(start(rank(javaCommand(RankMains.AllReduce.class),
          Map.of("MASTER_ADDR", "127.0.0.1", "MASTER_PORT", Integer.toString(port),
              "OMPI_COMM_WORLD_RANK", Integer.toString(r), "OMPI_COMM_WORLD_SIZE", "2",
              "OMPI_COMM_WORLD_LOCAL_RANK", Integer.toString(r), "OMPI_COMM_WORLD_LOCAL_SIZE", "2"),
          tmp.resolve("ompi" + r + ".txt"))));
    }
    try {
      for (int r = 0; r < 2; r++) {
        assertThat(ps.get(r).waitFor(GUARD.toSeconds(), TimeUnit.SECONDS)).isTrue();
        List<String> out = Files.readAllLines(tmp.resolve("ompi" + r + ".txt"));
        assertThat(ps.get(r).exitValue()).as("rank %d output: %s", r, out).isZero();
        assertThat(out).contains("source=openmpi rank=" + r + " size=2 localRank=" + r + " localSize=2 port=" + port
            + " result=[300, 302, 304, 306, 308, 310]");
      }
    } finally {
      ps.forEach(Process::destroyForcibly);
    }
  }
}
