package io.nccl4j.launch;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * A launcher killed outright (SIGKILL: no hook of its runs) takes its ranks with it: each rank
 * notices within the watch's poll, exits, and frees its ports; nothing a rank made is left in the
 * temporary directory. The bounds (30 s) are far above the mechanism's own figure (well under 5 s:
 * a 250 ms poll, then exit) and far below the ranks' 10-minute sleep, so that a slow machine cannot
 * make them fail; the time measured is printed.
 */
@Tag("multiprocess")
class LauncherDeathTest {
  private static final Duration GONE_WITHIN = Duration.ofSeconds(30);
  private static final Duration START_WITHIN = Duration.ofSeconds(120);

  private final ChildJvms jvms = new ChildJvms();

  @AfterEach
  void killLeftovers() {
    jvms.killAll();
  }

  private record Ready(int rank, long pid, int storePort, int transportPort) {}

  @Test
  void killingTheLauncherEndsEveryRankAndFreesItsPorts() throws Exception {
    List<String> rankCmd = ChildJvms.javaCommand(LauncherDeathMains.LongRank.class);
    List<String> launcherCmd = ChildJvms.javaCommand(LauncherDeathMains.RunLauncher.class, "3");
    launcherCmd.addAll(rankCmd);
    Process launcher = jvms.start(ChildJvms.rank(launcherCmd, Map.of()));
    BlockingQueue<String> out = ChildJvms.lines(launcher);
    List<Ready> ready = new ArrayList<>();
    long until = System.nanoTime() + START_WITHIN.toNanos();
    List<String> seen = new ArrayList<>();
    while (ready.size() < 3) {
      String line = out.poll(Math.max(1, until - System.nanoTime()), TimeUnit.NANOSECONDS);
      assertThat(line).as("the three ranks report READY within %s; output so far: %s", START_WITHIN, seen).isNotNull();
      seen.add(line);
      int at = line.indexOf("READY ");
      if (at >= 0) {
        String[] f = line.substring(at + 6).trim().split(" ");
        ready.add(new Ready(Integer.parseInt(f[0]), Long.parseLong(f[1]), Integer.parseInt(f[2]),
            Integer.parseInt(f[3])));
      }
    }
    List<Long> descendants = launcher.descendants().map(ProcessHandle::pid).toList();
    for (Ready r : ready) {
      assertThat(descendants).as("rank %d is the launcher's child", r.rank()).contains(r.pid());
    }

    long killed = System.nanoTime();
    launcher.destroyForcibly();
    assertThat(launcher.waitFor(30, TimeUnit.SECONDS)).isTrue();
    long deadline = killed + GONE_WITHIN.toNanos();
    for (Ready r : ready) {
      while (ChildJvms.alive(r.pid()) && System.nanoTime() - deadline < 0) {
        Thread.sleep(50);
      }
      assertThat(ChildJvms.alive(r.pid())).as("rank %d (pid %d) %s after its launcher was killed", r.rank(), r.pid(),
          GONE_WITHIN).isFalse();
    }
    long millis = (System.nanoTime() - killed) / 1_000_000;
    System.out.println("LauncherDeathTest: all 3 ranks gone " + millis + " ms after the launcher's SIGKILL");

    for (Ready r : ready) {
      assertFree(r.transportPort(), "rank " + r.rank() + "'s transport listener");
    }
    assertFree(ready.get(0).storePort(), "rank 0's store (MASTER_PORT)");
    for (Ready r : ready) {
      assertThat(tempEntriesOf(r.pid())).as("temporary files of rank %d (pid %d)", r.rank(), r.pid()).isEmpty();
    }
  }

  /**
   * A launcher asked to stop (SIGTERM, as a scheduler or {@code kill} does) stops every rank and says so once;
   * it blames no rank for dying of the signal it passed on, and exits 143 as a process ended by SIGTERM.
   */
  @Test
  void aLauncherStoppedFromOutsideSaysSoAndBlamesNoRank() throws Exception {
    List<String> launcherCmd = ChildJvms.javaCommand(LauncherDeathMains.RunLauncher.class, "2");
    launcherCmd.addAll(ChildJvms.javaCommand(LauncherDeathMains.LongRank.class));
    Process launcher = jvms.start(ChildJvms.rank(launcherCmd, Map.of()));
    BlockingQueue<String> out = ChildJvms.lines(launcher);
    List<String> seen = new ArrayList<>();
    long until = System.nanoTime() + START_WITHIN.toNanos();
    int ready = 0;
    while (ready < 2) {
      String line = out.poll(Math.max(1, until - System.nanoTime()), TimeUnit.NANOSECONDS);
      assertThat(line).as("both ranks report READY within %s; output so far: %s", START_WITHIN, seen).isNotNull();
      seen.add(line);
      ready += line.contains("READY ") ? 1 : 0;
    }
    List<ProcessHandle> ranks = launcher.descendants().toList();

    new ProcessBuilder("kill", "-TERM", Long.toString(launcher.pid())).start().waitFor(); // as a scheduler does

    assertThat(launcher.waitFor(GONE_WITHIN.toSeconds(), TimeUnit.SECONDS)).as("the launcher exits").isTrue();
    for (String line; (line = out.poll(2, TimeUnit.SECONDS)) != null; ) {
      seen.add(line);
    }
    assertThat(launcher.exitValue()).as(String.join("\n", seen)).isEqualTo(143);
    assertThat(seen).as(String.join("\n", seen))
        .containsOnlyOnce("nccl4j run: stopped from outside (SIGTERM, SIGINT or SIGHUP to the launcher); stopping every"
            + " rank")
        .noneMatch(l -> l.startsWith("nccl4j run: rank ") || l.startsWith("nccl4j run: failed"));
    for (ProcessHandle r : ranks) {
      assertThat(r.isAlive()).as("rank process %d after its launcher stopped", r.pid()).isFalse();
    }
  }

  /**
   * No socket listens on {@code port} any more (the kernel's own table, /proc/net/tcp and tcp6), and
   * a new ServerSocket binds to it. The bind is retried for a while and then only reported: on a
   * shared machine another process's connection may hold the same number as its local port, which
   * blocks a bind although the rank's listener is gone.
   */
  private static void assertFree(int port, String what) throws IOException, InterruptedException {
    assertThat(listening(port)).as("%s (port %d) still has a listener", what, port).isFalse();
    IOException last = null;
    for (int attempt = 0; attempt < 50; attempt++) {
      try (ServerSocket s = new ServerSocket(port)) {
        assertThat(s.getLocalPort()).as(what).isEqualTo(port);
        return;
      } catch (IOException e) {
        last = e;
        Thread.sleep(100);
      }
    }
    System.out.println("LauncherDeathTest: " + what + " (port " + port + ") has no listener, but binding it failed: "
        + last);
  }

  private static boolean listening(int port) throws IOException {
    String hexPort = String.format(":%04X", port);
    for (String table : List.of("/proc/net/tcp", "/proc/net/tcp6")) {
      Path p = Path.of(table);
      if (!Files.exists(p)) {
        continue;
      }
      List<String> lines = Files.readAllLines(p);
      for (String line : lines.subList(1, lines.size())) {
        String[] f = line.trim().split("\\s+");
        if (f.length > 3 && f[1].endsWith(hexPort) && f[3].equals("0A")) {
          return true;
        }
      }
    }
    return false;
  }

  /**
   * What a rank's JVM leaves in the temporary directory when it does not exit (its hsperfdata file,
   * named by its pid) and anything else named by its pid or nccl4j. A rank that exits removes them.
   */
  private static List<Path> tempEntriesOf(long pid) throws IOException {
    Path tmp = Path.of(System.getProperty("java.io.tmpdir"));
    List<Path> found = new ArrayList<>();
    Path perf = tmp.resolve("hsperfdata_" + System.getProperty("user.name")).resolve(Long.toString(pid));
    if (Files.exists(perf)) {
      found.add(perf);
    }
    try (Stream<Path> s = Files.list(tmp)) {
      s.filter(p -> {
        String n = p.getFileName().toString();
        return n.contains(Long.toString(pid)) && !n.startsWith("hsperfdata") || n.startsWith("nccl4j-" + pid);
      }).forEach(found::add);
    }
    return found;
  }

  @Test
  void aWatchedRankPrintsOneLineAndExitsWithStatus3WhenItsLauncherDies() throws Exception {
    Process fakeLauncher = jvms.start(new ProcessBuilder("sleep", "600"));
    Map<String, String> vars = new HashMap<>();
    vars.put(LauncherWatch.LAUNCHER_PID, Long.toString(fakeLauncher.pid()));
    Process rank = jvms.start(ChildJvms.rank(ChildJvms.javaCommand(LauncherDeathMains.BareWatch.class), vars));
    BlockingQueue<String> out = ChildJvms.lines(rank);
    assertThat(out.poll(START_WITHIN.toSeconds(), TimeUnit.SECONDS)).isEqualTo("WATCHING true");
    fakeLauncher.destroyForcibly();
    assertThat(rank.waitFor(GONE_WITHIN.toSeconds(), TimeUnit.SECONDS)).as("the rank exits").isTrue();
    assertThat(rank.exitValue()).isEqualTo(3);
    List<String> rest = new ArrayList<>();
    String line;
    while ((line = out.poll(5, TimeUnit.SECONDS)) != null) {
      rest.add(line);
    }
    assertThat(rest).containsExactly("nccl4j: rank 5: the launcher that started it (pid " + fakeLauncher.pid()
        + ") has died; exiting with status 3 to release this rank's ports and memory");
  }

  @Test
  void aRankWhoseLauncherIsAlreadyGoneExitsAtOnce() throws Exception {
    Process gone = new ProcessBuilder("true").start();
    assertThat(gone.waitFor(30, TimeUnit.SECONDS)).isTrue();
    Process rank = jvms.start(ChildJvms.rank(ChildJvms.javaCommand(LauncherDeathMains.BareWatch.class),
        Map.of(LauncherWatch.LAUNCHER_PID, Long.toString(gone.pid()))));
    BlockingQueue<String> out = ChildJvms.lines(rank);
    assertThat(rank.waitFor(START_WITHIN.toSeconds(), TimeUnit.SECONDS)).isTrue();
    assertThat(rank.exitValue()).isEqualTo(3);
    assertThat(out.poll(5, TimeUnit.SECONDS)).startsWith("nccl4j: rank 5: the launcher that started it (pid "
        + gone.pid() + ") has died");
  }

  /** torchrun, Slurm and a user's own launcher set no such variable: the rank is not watched at all. */
  @Test
  void aRankNotStartedByTheLauncherIsNotWatched() throws Exception {
    Process rank = jvms.start(ChildJvms.rank(ChildJvms.javaCommand(LauncherDeathMains.BareWatch.class), Map.of()));
    BlockingQueue<String> out = ChildJvms.lines(rank);
    assertThat(out.poll(START_WITHIN.toSeconds(), TimeUnit.SECONDS)).isEqualTo("WATCHING false");
    assertThat(rank.isAlive()).isTrue();
  }

  @Test
  void theLauncherNamesItselfToEveryRank() throws Exception {
    java.io.ByteArrayOutputStream buf = new java.io.ByteArrayOutputStream();
    java.io.PrintStream ps = new java.io.PrintStream(buf, true, StandardCharsets.UTF_8);
    int code = new Launcher(List.of("sh", "-c", "echo pid=$" + LauncherWatch.LAUNCHER_PID)).nprocPerNode(2)
        .output(ps, ps).run();
    assertThat(code).isZero();
    String me = Long.toString(ProcessHandle.current().pid());
    assertThat(buf.toString(StandardCharsets.UTF_8).lines().toList())
        .containsExactlyInAnyOrder("[rank 0] pid=" + me, "[rank 1] pid=" + me);
  }
}
