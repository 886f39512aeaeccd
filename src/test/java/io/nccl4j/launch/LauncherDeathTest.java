package io.nccl4j.launch;

import static org.assertj.core.api.Assertions.assertThat;

import io.nccl4j.testing.TestTime;
import io.nccl4j.testing.Waits;
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
 * temporary directory. The bounds (30 s, scaled by TestTime) are far above the mechanism's own figure (well
 * under 5 s: a 250 ms poll, then exit) and far below the ranks' 10-minute sleep, so that a slow machine cannot
 * make them fail; the time measured is printed.
 */
@Tag("multiprocess")
class LauncherDeathTest {
  private static final Duration GONE_WITHIN = TestTime.seconds(30);
  private static final Duration START_WITHIN = TestTime.seconds(120);

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
    // The ranks' own listening sockets (the kernel's inodes), so that what is checked after is theirs: another
    // process of the machine may listen on a port number a dead rank held.
    Map<String, Long> listeners = new HashMap<>();
    for (Ready r : ready) {
      listeners.put("rank " + r.rank() + "'s transport listener", listenerInode(r.transportPort()));
    }
    listeners.put("rank 0's store (MASTER_PORT)", listenerInode(ready.get(0).storePort()));
    // And the ranks' own temporary files, by identity: once a rank is gone its pid may name another process's.
    Map<Long, Map<Path, Object>> tempFiles = new HashMap<>();
    for (Ready r : ready) {
      tempFiles.put(r.pid(), fileKeys(tempEntriesOf(r.pid())));
    }
    assertThat(listeners).as("the ranks' listening sockets before the kill").allSatisfy((what, inode) ->
        assertThat(inode).as(what).isPositive());

    long killed = System.nanoTime();
    launcher.destroyForcibly();
    assertThat(launcher.waitFor(GONE_WITHIN.toSeconds(), TimeUnit.SECONDS)).isTrue();
    for (Ready r : ready) {
      // The ranks go together: each is given the whole bound (30 s × the factor) from now, a guard only.
      Waits.await("rank " + r.rank() + " (pid " + r.pid() + ") gone after its launcher was killed",
          Duration.ofSeconds(30)).until(() -> !ChildJvms.alive(r.pid()));
    }
    long millis = (System.nanoTime() - killed) / 1_000_000;
    System.out.println("LauncherDeathTest: all 3 ranks gone " + millis + " ms after the launcher's SIGKILL");

    for (Ready r : ready) {
      assertFree(r.transportPort(), "rank " + r.rank() + "'s transport listener", listeners);
    }
    assertFree(ready.get(0).storePort(), "rank 0's store (MASTER_PORT)", listeners);
    for (Ready r : ready) {
      Map<Path, Object> before = tempFiles.get(r.pid());
      List<Path> left = tempEntriesOf(r.pid()).stream().filter(p -> p.getFileName().toString().startsWith("nccl4j-")
          || before.containsKey(p) && before.get(p).equals(fileKey(p))).toList();
      assertThat(left).as("temporary files of rank %d (pid %d)", r.rank(), r.pid()).isEmpty();
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
    for (String line; (line = out.poll(TestTime.scaledSeconds(2), TimeUnit.SECONDS)) != null; ) {
      seen.add(line);
    }
    assertThat(launcher.exitValue()).as(String.join("\n", seen)).isEqualTo(143);
    // The facts, not the wording: the launcher says once that a signal (SIGTERM among those it names) stopped it.
    assertThat(seen).as(String.join("\n", seen))
        .filteredOn(l -> l.startsWith("nccl4j run: ") && l.contains("SIGTERM")).hasSize(1);
    assertThat(seen).as(String.join("\n", seen))
        .noneMatch(l -> l.startsWith("nccl4j run: rank ") || l.startsWith("nccl4j run: failed"));
    for (ProcessHandle r : ranks) {
      assertThat(r.isAlive()).as("rank process %d after its launcher stopped", r.pid()).isFalse();
    }
  }

  /**
   * The rank's listening socket on {@code port} goes from the kernel's own table (/proc/net/tcp and tcp6: no
   * socket of its inode listens), and a new ServerSocket binds to it. Another process of the machine may listen on
   * the same number since (a port is free once the rank is gone): that is not the rank's and is only reported; so
   * is a bind that still fails after a while, as another process's connection may hold the same number as its local
   * port, which blocks a bind although the rank's listener is gone.
   */
  private static void assertFree(int port, String what, Map<String, Long> listeners)
      throws IOException, InterruptedException {
    long inode = listeners.get(what);
    // A JVM whose main thread has exited shows as a zombie while its other threads still end, and its sockets
    // close with the last of them: the socket is waited for, not taken to be gone with the process.
    Waits.await(what + " (port " + port + ", socket inode " + inode + ") closed", Duration.ofSeconds(30))
        .until(() -> !listening(port, inode));
    if (listenerInode(port) != 0) {
      System.out.println("LauncherDeathTest: " + what + " (port " + port + ") is gone; another process listens on"
          + " that port now");
      return;
    }
    IOException last = null;
    for (int attempt = 0; attempt < 50; attempt++) {
      try (ServerSocket s = new ServerSocket(port)) {
        assertThat(s.getLocalPort()).as(what).isEqualTo(port);
        return;
      } catch (IOException e) {
        last = e;
        Thread.sleep(100); // kept: a retry of a bind that another process's connection may block; only reported
      }
    }
    System.out.println("LauncherDeathTest: " + what + " (port " + port + ") has no listener, but binding it failed: "
        + last);
  }

  /** Whether the socket of {@code inode} listens on {@code port} (the kernel's table). */
  private static boolean listening(int port, long inode) throws IOException {
    return listenerInodes(port).contains(inode);
  }

  /** The inode of a socket listening on {@code port}, or 0 when none does. */
  private static long listenerInode(int port) throws IOException {
    return listenerInodes(port).stream().findFirst().orElse(0L);
  }

  /** The inodes of the sockets listening on {@code port}: /proc/net/tcp and tcp6, state 0A, field 10. */
  private static List<Long> listenerInodes(int port) throws IOException {
    String hexPort = String.format(":%04X", port);
    List<Long> inodes = new ArrayList<>();
    for (String table : List.of("/proc/net/tcp", "/proc/net/tcp6")) {
      Path p = Path.of(table);
      if (!Files.exists(p)) {
        continue;
      }
      List<String> lines = Files.readAllLines(p);
      for (String line : lines.subList(1, lines.size())) {
        String[] f = line.trim().split("\\s+");
        if (f.length > 9 && f[1].endsWith(hexPort) && f[3].equals("0A")) {
          inodes.add(Long.parseLong(f[9]));
        }
      }
    }
    return inodes;
  }

  /** Each of {@code files} with its identity (device and inode), for those that still exist. */
  private static Map<Path, Object> fileKeys(List<Path> files) {
    Map<Path, Object> keys = new HashMap<>();
    for (Path p : files) {
      Object k = fileKey(p);
      if (k != null) {
        keys.put(p, k);
      }
    }
    return keys;
  }

  private static Object fileKey(Path p) {
    try {
      return Files.readAttributes(p, java.nio.file.attribute.BasicFileAttributes.class,
          java.nio.file.LinkOption.NOFOLLOW_LINKS).fileKey();
    } catch (IOException e) {
      return null;
    }
  }

  /**
   * What a rank's JVM leaves in the temporary directory when it does not exit (its hsperfdata file,
   * named by its pid) and anything else named by its pid (as a number of its own in the name, not digits
   * inside another number) or nccl4j. A rank that exits removes them.
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
        return n.matches(".*(^|[^0-9])" + pid + "([^0-9]|$).*") && !n.startsWith("hsperfdata")
            || n.startsWith("nccl4j-" + pid);
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
    while ((line = out.poll(TestTime.scaledSeconds(5), TimeUnit.SECONDS)) != null) {
      rest.add(line);
    }
    // One line with the facts: the rank, the launcher's pid, the status it exits with.
    assertThat(rest).singleElement().asString().startsWith("nccl4j: rank 5: ")
        .contains("(pid " + fakeLauncher.pid() + ")").contains("status 3");
  }

  @Test
  void aRankWhoseLauncherIsAlreadyGoneExitsAtOnce() throws Exception {
    Process gone = new ProcessBuilder("true").start();
    assertThat(gone.waitFor(TestTime.scaledSeconds(30), TimeUnit.SECONDS)).isTrue();
    Process rank = jvms.start(ChildJvms.rank(ChildJvms.javaCommand(LauncherDeathMains.BareWatch.class),
        Map.of(LauncherWatch.LAUNCHER_PID, Long.toString(gone.pid()))));
    BlockingQueue<String> out = ChildJvms.lines(rank);
    assertThat(rank.waitFor(START_WITHIN.toSeconds(), TimeUnit.SECONDS)).isTrue();
    assertThat(rank.exitValue()).isEqualTo(3);
    assertThat(out.poll(TestTime.scaledSeconds(5), TimeUnit.SECONDS)).startsWith("nccl4j: rank 5: ")
        .contains("(pid " + gone.pid() + ")").contains("status 3");
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
