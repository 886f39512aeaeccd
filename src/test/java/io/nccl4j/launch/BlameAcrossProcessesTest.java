package io.nccl4j.launch;

import static org.assertj.core.api.Assertions.assertThat;

import io.nccl4j.PeerFailureException;
import io.nccl4j.testing.TestTime;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The right blame across processes: under the {@link Launcher}, rank 2 of 3 dies of its own
 * exception while its peers wait for it inside a collective. Every peer's exception names rank 2
 * and quotes its exception — type and message, cut after 1024 characters with a marker — not a
 * closed connection; the launcher's summary names rank 2 and quotes the line its JVM printed. The
 * ranks' group timeout is 60 s: nothing here waits for it (it scales by TestTime with the bound that shows so).
 * And a rank that is stopped (SIGSTOP) while its peers wait for it: they time out, and the launcher blames the
 * stopped rank, not the peer whose timeout the job's store records first.
 */
@Tag("multiprocess")
class BlameAcrossProcessesTest {
  /** Guards against a hang only: the launcher must be done well within it. */
  private static final Duration GUARD = TestTime.seconds(240);
  private static final String MARKER = "rank 2 found its input corrupt (distinctive 7f3a)";

  private ChildJvms children;

  @BeforeEach
  void remember() {
    children = new ChildJvms();
  }

  @AfterEach
  void killEverythingStartedHere() {
    children.killAll();
  }

  @Test
  void everyRankAndTheLauncherNameTheRankThatThrewAndQuoteIt() throws Exception {
    String tail = "x".repeat(1100);
    String message = MARKER + " " + tail;
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    ByteArrayOutputStream err = new ByteArrayOutputStream();
    PrintStream o = new PrintStream(out, true, StandardCharsets.UTF_8);
    PrintStream e = new PrintStream(err, true, StandardCharsets.UTF_8);
    Launcher launcher = new Launcher(ChildJvms.javaCommand(BlameMains.ThrowMidCollective.class,
        Long.toString(TestTime.scaledMillis(60, TimeUnit.SECONDS)), "2",
        message)).nprocPerNode(3).grace(Duration.ofSeconds(30)).output(o, e);
    long start = System.nanoTime();
    int status = CompletableFuture.supplyAsync(launcher::run).get(GUARD.toSeconds(), TimeUnit.SECONDS);
    Duration took = Duration.ofNanos(System.nanoTime() - start);
    List<String> outLines = out.toString(StandardCharsets.UTF_8).lines().toList();
    List<String> errLines = err.toString(StandardCharsets.UTF_8).lines().toList();
    String all = String.join("\n", outLines) + "\n--- stderr ---\n" + String.join("\n", errLines);

    assertThat(status).as(all).isEqualTo(1);
    // Three JVMs start and end in this; what matters is that nobody waited for the 60 s timeout.
    assertThat(took).as(all).isLessThan(TestTime.seconds(45));
    assertThat(outLines).as(all).contains("[rank 2] rank 2 throws");
    String quoted = "rank 2 failed: IllegalStateException: " + message.substring(0, 1024) + "… ["
        + (message.length() - 1024) + " more characters]";
    for (int r = 0; r < 2; r++) {
      assertThat(outLines).as(all).contains("[rank " + r + "] rank " + r + " caught "
          + PeerFailureException.class.getName() + " failedRank=2: " + quoted);
    }
    // Rank 2 may exit first ("rank 2 exited with status 1: …") or, while it waits for its failure to reach the
    // store, after a peer that learned of it ("rank 2 failed: …", the store's record): either way rank 2, in its words.
    assertThat(errLines).as(all).anyMatch(s -> s.startsWith("nccl4j run: failed: rank 2 exited with status 1:"
        + " java.lang.IllegalStateException: " + MARKER) || s.startsWith("nccl4j run: failed: rank 2 failed:"
        + " java.lang.IllegalStateException: " + MARKER));
    assertThat(errLines).as(all).noneMatch(s -> s.startsWith("nccl4j run: failed: rank 0")
        || s.startsWith("nccl4j run: failed: rank 1"));
  }

  /**
   * Rank 1 of 3 is stopped (SIGSTOP) once every rank is ready; ranks 0 and 2 then time out waiting for it, and the
   * first failure the job's store records is the timeout of one of them, a healthy rank. The launcher, which
   * started rank 1 and sees it stopped, blames rank 1 and says that it is stopped.
   */
  @Test
  void theLauncherBlamesAStoppedRankNotThePeerThatTimedOutWaitingForIt(@TempDir Path tmp) throws Exception {
    Path go = tmp.resolve("go");
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    ByteArrayOutputStream err = new ByteArrayOutputStream();
    PrintStream o = new PrintStream(out, true, StandardCharsets.UTF_8);
    PrintStream e = new PrintStream(err, true, StandardCharsets.UTF_8);
    Launcher launcher = new Launcher(ChildJvms.javaCommand(BlameMains.TimeOutOnAStoppedRank.class,
        Long.toString(TestTime.scaledMillis(4, TimeUnit.SECONDS)), go.toString()))
        .nprocPerNode(3).grace(Duration.ofSeconds(2)).output(o, e);
    CompletableFuture<Integer> run = CompletableFuture.supplyAsync(launcher::run);
    long victim = -1;
    try {
      long[] pids = new long[3];
      long until = System.nanoTime() + GUARD.toNanos();
      Pattern ready = Pattern.compile("\\[rank (\\d)\\] rank \\1 ready pid (\\d+)");
      for (int r = 0; r < 3; r++) {
        while (pids[r] == 0) {
          for (String line : out.toString(StandardCharsets.UTF_8).lines().toList()) {
            Matcher m = ready.matcher(line);
            if (m.matches() && Integer.parseInt(m.group(1)) == r) {
              pids[r] = Long.parseLong(m.group(2));
            }
          }
          assertThat(System.nanoTime() < until && !run.isDone()).as("rank %d ready; stdout: %s; stderr: %s", r,
              out.toString(StandardCharsets.UTF_8), err.toString(StandardCharsets.UTF_8)).isTrue();
          Thread.sleep(20);
        }
      }
      victim = pids[1];
      assertThat(startedHere(victim)).as("rank 1's pid %d is a process this test's launcher started", victim)
          .isPresent();
      signal("STOP", victim);
      Files.writeString(go, "go");
      int status = run.get(GUARD.toSeconds(), TimeUnit.SECONDS);
      List<String> errLines = err.toString(StandardCharsets.UTF_8).lines().toList();
      String all = out.toString(StandardCharsets.UTF_8) + "\n--- stderr ---\n" + String.join("\n", errLines);
      // The status is the first rank's to exit (a survivor's uncaught timeout): the launcher killed rank 1.
      assertThat(status).as(all).isEqualTo(1);
      assertThat(errLines).as(all).anyMatch(s -> s.startsWith("nccl4j run: failed: rank 1 (pid " + pids[1]
          + ") is stopped (SIGSTOP or a debugger); rank ") && s.contains(" timed out waiting: "));
      assertThat(errLines).as(all).noneMatch(s -> s.startsWith("nccl4j run: failed: rank 0")
          || s.startsWith("nccl4j run: failed: rank 2"));
    } finally {
      if (victim > 0) {
        Optional<ProcessHandle> stopped = startedHere(victim);
        if (stopped.isPresent()) {
          // SIGKILL ends a stopped process too; SIGCONT first, to be plain. Not asserted: it may have ended since.
          new ProcessBuilder("kill", "-CONT", Long.toString(victim)).inheritIO().start()
              .waitFor(TestTime.scaledSeconds(10), TimeUnit.SECONDS);
          stopped.get().destroyForcibly();
        }
      }
    }
  }

  /** The process {@code pid}, when it is a live descendant of this JVM (a rank of this test's launcher). */
  private static Optional<ProcessHandle> startedHere(long pid) {
    return ProcessHandle.current().descendants().filter(h -> h.pid() == pid && h.isAlive()).findFirst();
  }

  private static void signal(String name, long pid) throws Exception {
    Process k = new ProcessBuilder("kill", "-" + name, Long.toString(pid)).inheritIO().start();
    assertThat(k.waitFor(TestTime.scaledSeconds(10), TimeUnit.SECONDS)).isTrue();
    assertThat(k.exitValue()).as("kill -%s %d", name, pid).isZero();
  }
}
