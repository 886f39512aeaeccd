package io.nccl4j.launch;

import static org.assertj.core.api.Assertions.assertThat;

import io.nccl4j.CollectiveMismatchException;
import io.nccl4j.CollectiveTimeoutException;
import io.nccl4j.PeerFailureException;
import io.nccl4j.testing.TestJob;
import io.nccl4j.testing.TestTime;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.function.Predicate;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * A rank that fails — its main throws, it exits, it is killed, stopped, or aborts its group — in a
 * job of OS processes on the CPU backend over TCP: every survivor's pending and later collectives
 * fail naming that rank within twice the group timeout (a stopped rank: a timeout error after at
 * least half of it), and after abort the ranks can create a new group on the same store. The rank
 * program is {@link RankFailureMains.Scenario}; the survivors measure each operation themselves, from
 * issuing it to its exception, and print it. The bounds are the requirement's, nothing tighter.
 * Every process started here is killed after each test.
 *
 * <p>Longer than 400 lines on purpose: every scenario starts the same job of processes ({@code Job}, below) and
 * reads its ranks' output, so the scenarios stay beside that one harness rather than in classes that would each
 * need it.
 */
@Tag("multiprocess")
class RankFailureProcessTest {
  /**
   * The groups' timeout. The assertions below are about behaviour in terms of it (a timeout error within twice it,
   * not before half of it), so it scales with the machine's load ({@link TestTime}) together with those bounds.
   */
  private static final Duration TIMEOUT = TestTime.seconds(4);
  /** For a failure that must not wait for the timeout: the survivors must learn of it within {@link #PROMPT}. */
  private static final Duration LONG_TIMEOUT = TestTime.seconds(20);
  private static final Duration PROMPT = TestTime.seconds(2);
  /** How long the test waits for a line or an exit: only a guard against a hang, measures nothing. */
  private static final Duration GUARD = TestTime.seconds(60);
  private static final Pattern FAILED = Pattern.compile(
      "rank (\\d+) op (\\w+) failed after (\\d+) ms: ([\\w.$]+) failedRank=(-?\\d+): (.*)");

  @TempDir
  Path tmp;

  private ChildJvms children;

  @BeforeEach
  void remember() {
    children = new ChildJvms();
  }

  @AfterEach
  void killEverythingStartedHere() {
    children.killAll();
  }

  // ------------------------------------------------------------------ a job of processes

  /** One failed operation as a survivor reported it. */
  private record Failure(int rank, String op, long millis, String type, int failedRank, String message) {}

  /** The ranks of one job, started directly here (no launcher to stop the survivors). */
  private final class Job {
    final int size;
    final List<Process> ps = new ArrayList<>();
    /** Each rank's output so far, appended by a reader thread. */
    final List<List<String>> out = new ArrayList<>();
    /** Counted down when a rank's output ends (it exited). */
    final List<CountDownLatch> ended = new ArrayList<>();
    /** The job's identity: the /dev/shm segments it counts are its own. */
    final TestJob identity = TestJob.create("rank-failure");

    /** Over TCP only: the scenarios below are about what the sockets tell (the shared-memory ones further down). */
    Job(String scenario, int size, int victim, String... extra) throws IOException {
      this(false, scenario, size, victim, extra);
    }

    /** With {@code sharedMemory}, the ranks' collectives run through /dev/shm, as by default on one host. */
    Job(boolean sharedMemory, String scenario, int size, int victim, String... extra) throws IOException {
      this(sharedMemory, scenario, size, victim, TIMEOUT, extra);
    }

    /** With the group timeout {@code timeout}. */
    Job(boolean sharedMemory, String scenario, int size, int victim, Duration timeout, String... extra)
        throws IOException {
      this(sharedMemory, scenario, size, victim, timeout, Map.of(), extra);
    }

    /** With {@code victimEnv} in the victim's environment only. */
    Job(boolean sharedMemory, String scenario, int size, int victim, Duration timeout, Map<String, String> victimEnv,
        String... extra) throws IOException {
      this.size = size;
      int port = Launcher.freePort();
      for (int r = 0; r < size; r++) {
        Map<String, String> env = new java.util.HashMap<>(Map.of("MASTER_ADDR", "127.0.0.1", "MASTER_PORT",
            Integer.toString(port), "RANK", Integer.toString(r), "WORLD_SIZE", Integer.toString(size)));
        env.put("NCCL4J_SHM", sharedMemory ? "1" : "0");
        env.putAll(identity.environment());
        if (r == victim) {
          env.putAll(victimEnv);
        }
        Process p = children.start(ChildJvms.rank(
            ChildJvms.javaCommand(RankFailureMains.Scenario.class, args(scenario, timeout, victim, extra)), env));
        ps.add(p);
        List<String> lines = new CopyOnWriteArrayList<>();
        CountDownLatch end = new CountDownLatch(1);
        out.add(lines);
        ended.add(end);
        Thread t = new Thread(() -> {
          try (BufferedReader in = new BufferedReader(new InputStreamReader(p.getInputStream(),
              StandardCharsets.UTF_8))) {
            String line;
            while ((line = in.readLine()) != null) {
              lines.add(line);
            }
          } catch (IOException e) {
            // the process went away
          } finally {
            end.countDown();
          }
        }, "rank" + r + "-output");
        t.setDaemon(true);
        t.start();
      }
    }

    /** Waits until rank {@code r} prints a line matching {@code p}. */
    String await(int r, Predicate<String> p) throws InterruptedException {
      long until = System.nanoTime() + GUARD.toNanos();
      while (System.nanoTime() < until) {
        for (String s : out.get(r)) {
          if (p.test(s)) {
            return s;
          }
        }
        if (ended.get(r).await(20, TimeUnit.MILLISECONDS)) {
          break;
        }
      }
      for (String s : out.get(r)) {
        if (p.test(s)) {
          return s;
        }
      }
      throw new AssertionError("rank " + r + " did not print the expected line; output: " + all());
    }

    /** Waits for rank {@code r} to exit and returns its status; its whole output is then in {@link #out}. */
    int exit(int r) throws InterruptedException {
      assertThat(ps.get(r).waitFor(GUARD.toSeconds(), TimeUnit.SECONDS)).as("rank %d exits; output: %s", r, all())
          .isTrue();
      assertThat(ended.get(r).await(GUARD.toSeconds(), TimeUnit.SECONDS)).as("rank %d output ends", r).isTrue();
      return ps.get(r).exitValue();
    }

    List<String> out(int r) {
      return out.get(r);
    }

    long pid(int r) {
      return ps.get(r).pid();
    }

    String all() {
      StringBuilder b = new StringBuilder();
      for (int r = 0; r < size; r++) {
        b.append("\n--- rank ").append(r).append(": ").append(String.join("\n    ", out(r)));
      }
      return b.toString();
    }

    /** The failure rank {@code r} reported for {@code op}. */
    Failure failure(int r, String op) {
      for (String s : out(r)) {
        Matcher m = FAILED.matcher(s);
        if (m.matches() && m.group(2).equals(op)) {
          return new Failure(Integer.parseInt(m.group(1)), op, Long.parseLong(m.group(3)), m.group(4),
              Integer.parseInt(m.group(5)), m.group(6));
        }
      }
      throw new AssertionError("rank " + r + " reported no failure of op " + op + "; output: " + all());
    }
  }

  private static String[] args(String scenario, Duration timeout, int victim, String... extra) {
    List<String> a = new ArrayList<>(List.of(scenario, Long.toString(timeout.toMillis()), Integer.toString(victim)));
    a.addAll(List.of(extra));
    return a.toArray(String[]::new);
  }

  private static String sum(int round, int size) {
    return Arrays.toString(RankFailureMains.expectedSum(round, size));
  }

  private static void kill(String signal, long pid) throws Exception {
    Process k = new ProcessBuilder("kill", "-" + signal, Long.toString(pid)).inheritIO().start();
    assertThat(k.waitFor(TestTime.scaledSeconds(10), TimeUnit.SECONDS)).isTrue();
    assertThat(k.exitValue()).as("kill -%s %d", signal, pid).isZero();
  }

  /** Cleanup of a stopped rank (SIGKILL ends a stopped process too; SIGCONT first, to be plain). */
  private static void resumeAndKill(Process p) throws Exception {
    new ProcessBuilder("kill", "-CONT", Long.toString(p.pid())).inheritIO().start()
        .waitFor(TestTime.scaledSeconds(10), TimeUnit.SECONDS);
    p.destroyForcibly();
    p.waitFor(TestTime.scaledSeconds(10), TimeUnit.SECONDS);
  }

  /**
   * Survivor {@code r}'s operations {@code ops} each failed with a {@link PeerFailureException}
   * naming {@code victim}, within twice the timeout of being issued.
   */
  private static void failedNaming(Job job, int r, int victim, String... ops) {
    for (String op : ops) {
      Failure f = job.failure(r, op);
      assertThat(f.type()).as("rank %d op %s: %s", r, op, f).isEqualTo(PeerFailureException.class.getName());
      assertThat(f.failedRank()).as("rank %d op %s: %s", r, op, f).isEqualTo(victim);
      assertThat(f.message()).as("rank %d op %s", r, op).contains("rank " + victim);
      assertThat(f.millis()).as("rank %d op %s: %s", r, op, f).isLessThan(TIMEOUT.multipliedBy(2).toMillis());
    }
  }

  private static List<Integer> survivors(int size, int victim) {
    List<Integer> l = new ArrayList<>();
    for (int r = 0; r < size; r++) {
      if (r != victim) {
        l.add(r);
      }
    }
    return l;
  }

  // ------------------------------------------------------------------ the scenarios

  @Test
  void rankThrowingBetweenCollectivesFailsThePendingAndLaterCollectivesOfEveryPeer() throws Exception {
    int size = 3;
    int victim = 1;
    Job job = new Job("throw", size, victim);
    assertThat(job.exit(victim)).as("uncaught exception: status 1; output: %s", job.all()).isEqualTo(1);
    assertThat(job.out(victim)).contains("rank 1 op warmup returned " + sum(0, size), "rank 1 throws");
    assertThat(job.out(victim)).anyMatch(s -> s.contains("java.lang.IllegalStateException: rank 1 throws between"
        + " collectives"));
    for (int r : survivors(size, victim)) {
      assertThat(job.exit(r)).as("rank %d; output: %s", r, job.all()).isZero();
      assertThat(job.out(r)).contains("rank " + r + " op warmup returned " + sum(0, size), "rank " + r + " done");
      failedNaming(job, r, victim, "A", "B", "C");
    }
  }

  /**
   * The victim dies before it joins: it never connects to the store, so it leaves no departure notice
   * and never publishes its address, and no one can tell that it died rather than being late; the
   * survivors time out, each naming it as the rank it waited
   * for — rank 0 (which connects to rank 1) by its deadline, not the store's or the connect timeout;
   * rank 2, waiting for rank 1 to connect, by its own deadline or by rank 0's timeout, which it finds in
   * the store if rank 0's deadline comes first (both name rank 1).
   */
  @Test
  void rankThrowingBeforeJoiningTimesTheOthersOutNamingIt() throws Exception {
    int size = 3;
    int victim = 1;
    Job job = new Job("throw-before-joining", size, victim);
    assertThat(job.exit(victim)).as("output: %s", job.all()).isEqualTo(1);
    assertThat(job.out(victim)).contains("rank 1 throws");
    assertThat(job.out(victim)).anyMatch(s -> s.contains("java.lang.IllegalStateException: rank 1 throws before"
        + " joining the group"));
    String rank0 = "Rank 0 was waiting for rank 1 to join the group (ALLREDUCE #1).";
    Map<Integer, List<String>> waitedFor = Map.of(0, List.of(rank0),
        2, List.of("Rank 2 was waiting for rank 1 to connect (ALLREDUCE #1).", "interrupted when rank 0 timed out: " + "Watchdog"));
    for (int r : survivors(size, victim)) {
      assertThat(job.exit(r)).as("rank %d; output: %s", r, job.all()).isZero();
      for (String op : List.of("A", "B", "C")) {
        Failure f = job.failure(r, op);
        assertThat(f.type()).as("rank %d op %s: %s", r, op, f).isEqualTo(CollectiveTimeoutException.class.getName());
        assertThat(f.message()).as("rank %d op %s", r, op).contains("Watchdog caught collective operation timeout")
            .containsAnyOf(waitedFor.get(r).toArray(new String[0]));
        if (r == 2 && !f.message().contains(waitedFor.get(2).get(0))) {
          assertThat(f.message()).as("rank 2 op %s, quoting rank 0", op).contains(rank0);
        }
        assertThat(f.millis()).as("rank %d op %s: %s", r, op, f).isLessThan(TIMEOUT.multipliedBy(2).toMillis());
      }
    }
  }

  /**
   * The victim joins the store, then halts where its transport would publish its address — after it registered
   * its departure notices, before it published anything. Unlike a rank that never joined, its store connection
   * closes, and the store sets its notices: every survivor's first collective fails naming it, well before the 20
   * s timeout — rank 0, which reads its address, rank 2, which waits for it to connect, and rank 3, which waits
   * for rank 0 (failed of it without connecting) and takes the failure a survivor left in the store. Only rank 0's
   * words are certain: the others may hear of it from a peer before they find the notice themselves.
   */
  @Test
  void rankDyingAfterJoiningTheStoreBeforePublishingFailsEveryPeerPromptlyNamingIt() throws Exception {
    int size = 4;
    int victim = 1;
    Job job = new Job(false, "die-in-rendezvous", size, victim, LONG_TIMEOUT);
    assertThat(job.exit(victim)).as("halted; output: %s", job.all()).isEqualTo(1);
    assertThat(job.out(victim)).contains("rank 1 halts before publishing its transport address");
    for (int r : survivors(size, victim)) {
      assertThat(job.exit(r)).as("rank %d; output: %s", r, job.all()).isZero();
      departureNamed(job, r, victim, "rank 1's connection to the job's store ended before it published its"
          + " transport address (transport/addr/1)");
    }
    assertThat(job.failure(0, "A").message()).contains("rank 0 was waiting for rank 1's transport address");
  }

  /**
   * The same with the default on one host: each survivor's first window waits for every rank's segment entry and
   * finds the victim's notice there itself.
   */
  @Test
  void sharedMemoryRankDyingAfterJoiningTheStoreBeforePublishingFailsEveryPeerPromptlyNamingIt() throws Exception {
    int size = 3;
    int victim = 1;
    Job job = new Job(true, "die-in-rendezvous", size, victim, LONG_TIMEOUT);
    assertThat(job.exit(victim)).as("halted; output: %s", job.all()).isEqualTo(1);
    for (int r : survivors(size, victim)) {
      assertThat(job.exit(r)).as("rank %d; output: %s", r, job.all()).isZero();
      departureNamed(job, r, victim, "rank " + r + " was waiting for rank 1's shared-memory segment entry (ALLREDUCE"
          + " #1), but the store holds rank 1's departure notice instead: rank 1's connection to the job's store"
          + " ended before it published its shared-memory segment entry (shm/segment/1)");
    }
  }

  /**
   * Survivor {@code r}'s operations A, B and C each failed with a {@link PeerFailureException} naming {@code
   * victim} and quoting {@code words}, within {@link #PROMPT} of being issued: far below the group's timeout.
   */
  private static void departureNamed(Job job, int r, int victim, String words) {
    for (String op : List.of("A", "B", "C")) {
      Failure f = job.failure(r, op);
      assertThat(f.type()).as("rank %d op %s: %s", r, op, f).isEqualTo(PeerFailureException.class.getName());
      assertThat(f.failedRank()).as("rank %d op %s: %s", r, op, f).isEqualTo(victim);
      assertThat(f.message()).as("rank %d op %s", r, op).contains(words);
      assertThat(f.millis()).as("rank %d op %s: %s", r, op, f).isLessThan(PROMPT.toMillis());
    }
  }

  /**
   * The victim throws before it ever connected to anyone: no connection breaks, but it leaves its
   * failure in the store. Rank 2, waiting for rank 1 to connect, takes it from there between its polls
   * and fails with rank 1's own error; rank 0 waits for rank 2 (its ring neighbour) and learns of it
   * from rank 2 or by its deadline, within the bound — hence no naming assertion for it.
   */
  @Test
  void rankThrowingBeforeItsFirstCollectiveFailsEveryPeerWithinTwiceTheTimeout() throws Exception {
    int size = 3;
    int victim = 1;
    Job job = new Job("throw-first", size, victim);
    assertThat(job.exit(victim)).as("output: %s", job.all()).isEqualTo(1);
    assertThat(job.out(victim)).contains("rank 1 throws");
    for (int r : survivors(size, victim)) {
      assertThat(job.exit(r)).as("rank %d; output: %s", r, job.all()).isZero();
      for (String op : List.of("A", "B", "C")) {
        Failure f = job.failure(r, op);
        assertThat(f.type()).as("rank %d op %s: %s", r, op, f)
            .isIn(PeerFailureException.class.getName(), CollectiveTimeoutException.class.getName());
        assertThat(f.millis()).as("rank %d op %s: %s", r, op, f).isLessThan(TIMEOUT.multipliedBy(2).toMillis());
      }
    }
    for (String op : List.of("A", "B", "C")) {
      assertThat(job.failure(2, op).message()).as("rank 2 op %s", op)
          .contains("rank 1 throws before its first collective");
    }
  }

  /**
   * A rank whose code throws inside {@code try (ProcessGroups.Joined j = …)}: the statement closes the group before
   * the exception leaves the thread, yet every peer reports the exception itself, not "rank 1 closed its process
   * group" — over TCP and through shared memory.
   */
  @ParameterizedTest
  @ValueSource(booleans = {false, true})
  void rankThrowingInsideTryWithResourcesFailsEveryPeerWithItsException(boolean sharedMemory) throws Exception {
    int size = 3;
    int victim = 1;
    Job job = new Job(sharedMemory, "throw-in-try", size, victim);
    assertThat(job.exit(victim)).as("output: %s", job.all()).isEqualTo(1);
    assertThat(job.out(victim)).contains("rank 1 throws");
    for (int r : survivors(size, victim)) {
      assertThat(job.exit(r)).as("rank %d; output: %s", r, job.all()).isZero();
      Failure f = job.failure(r, "A");
      assertThat(f.message()).as("rank %d: %s", r, f).contains("rank 1 throws inside try-with-resources")
          .doesNotContain("closed its process group");
      assertThat(f.failedRank()).as("rank %d: %s", r, f).isEqualTo(victim);
    }
  }

  @Test
  void rankExitingInTheMiddleOfALoopFailsTheNextIterationOfEveryPeer() throws Exception {
    int size = 3;
    int victim = 1;
    Job job = new Job("exit", size, victim);
    assertThat(job.exit(victim)).as("output: %s", job.all()).isEqualTo(3);
    assertThat(job.out(victim)).contains("rank 1 op iteration0 returned " + sum(10, size),
        "rank 1 op iteration1 returned " + sum(11, size), "rank 1 exits with status 3 before iteration 2");
    for (int r : survivors(size, victim)) {
      assertThat(job.exit(r)).as("rank %d; output: %s", r, job.all()).isZero();
      assertThat(job.out(r)).contains("rank " + r + " op iteration0 returned " + sum(10, size),
          "rank " + r + " op iteration1 returned " + sum(11, size));
      assertThat(job.out(r)).noneMatch(s -> s.startsWith("rank " + r + " op iteration3"));
      failedNaming(job, r, victim, "iteration2", "C");
    }
  }

  @Test
  void rankKilledWithSigkillWhileThePeersWaitFailsThemNamingIt() throws Exception {
    int size = 4;
    int victim = 1;
    Job job = new Job("kill", size, victim);
    job.await(victim, s -> s.equals("rank 1 ready"));
    for (int r : survivors(size, victim)) {
      job.await(r, s -> s.equals("rank " + r + " pending"));
    }
    kill("KILL", job.pid(victim));
    assertThat(job.exit(victim)).isEqualTo(137);
    for (int r : survivors(size, victim)) {
      assertThat(job.exit(r)).as("rank %d; output: %s", r, job.all()).isZero();
      assertThat(job.out(r)).contains("rank " + r + " op warmup returned " + sum(0, size));
      failedNaming(job, r, victim, "A", "B", "C");
    }
  }

  @Test
  void rankStoppedWithSigstopGivesThePeersATimeoutAfterAtLeastHalfTheTimeout() throws Exception {
    int size = 3;
    int victim = 1;
    Job job = new Job("stop", size, victim);
    for (int r = 0; r < size; r++) {
      int rank = r;
      job.await(r, s -> s.equals("rank " + rank + " looping"));
    }
    kill("STOP", job.pid(victim));
    try {
      for (int r : survivors(size, victim)) {
        assertThat(job.exit(r)).as("rank %d; output: %s", r, job.all()).isZero();
        assertThat(job.out(r)).anyMatch(s -> s.matches("rank " + r + " iterations ok [1-9]\\d* wrong 0"));
        for (String op : List.of("A", "C")) {
          Failure f = job.failure(r, op);
          assertThat(f.type()).as("rank %d op %s: %s", r, op, f).isEqualTo(CollectiveTimeoutException.class.getName());
          assertThat(f.message()).as("rank %d op %s", r, op).contains("Watchdog caught collective operation timeout");
        }
        Failure a = job.failure(r, "A");
        assertThat(a.millis()).as("rank %d: %s", r, a).isGreaterThanOrEqualTo(TIMEOUT.dividedBy(2).toMillis())
            .isLessThan(TIMEOUT.multipliedBy(2).toMillis());
      }
      assertThat(ChildJvms.alive(job.pid(victim))).as("the stopped rank is still there").isTrue();
    } finally {
      resumeAndKill(job.ps.get(victim));
    }
  }

  @Test
  void rankStoppedBeforeTheCollectiveGivesEveryPeerATimeoutEvenThoseThatEnteredLater() throws Exception {
    int size = 4;
    int victim = 1;
    Path go = tmp.resolve("go");
    Job job = new Job("stop-staggered", size, victim, go.toString());
    for (int r = 0; r < size; r++) {
      int rank = r;
      job.await(r, s -> s.equals("rank " + rank + " ready"));
    }
    kill("STOP", job.pid(victim));
    try {
      Files.writeString(go, "go");
      for (int r : survivors(size, victim)) {
        assertThat(job.exit(r)).as("rank %d; output: %s", r, job.all()).isZero();
        assertThat(job.out(r)).contains("rank " + r + " op warmup returned " + sum(0, size));
        for (String op : List.of("A", "B", "C")) {
          Failure f = job.failure(r, op);
          assertThat(f.type()).as("rank %d op %s: %s", r, op, f).isEqualTo(CollectiveTimeoutException.class.getName());
          assertThat(f.message()).as("rank %d op %s", r, op).contains("Watchdog caught collective operation timeout")
              .contains("Rank 2 was waiting for ALLREDUCE #2 data from rank 1.");
        }
        for (String op : List.of("A", "B")) {
          Failure f = job.failure(r, op);
          assertThat(f.millis()).as("rank %d op %s: %s", r, op, f).isGreaterThanOrEqualTo(TIMEOUT.dividedBy(2).toMillis())
              .isLessThan(TIMEOUT.multipliedBy(2).toMillis());
        }
      }
      assertThat(ChildJvms.alive(job.pid(victim))).as("the stopped rank is still there").isTrue();
    } finally {
      resumeAndKill(job.ps.get(victim));
    }
  }

  @Test
  void rankAbortingItsGroupTwiceFailsThePeersNamingIt() throws Exception {
    int size = 3;
    int victim = 1;
    Job job = new Job("abort", size, victim);
    assertThat(job.exit(victim)).as("output: %s", job.all()).isZero();
    assertThat(job.out(victim)).contains("rank 1 op warmup returned " + sum(0, size),
        "rank 1 aborted twice, closed=true, next collective: java.lang.IllegalStateException", "rank 1 done");
    for (int r : survivors(size, victim)) {
      assertThat(job.exit(r)).as("rank %d; output: %s", r, job.all()).isZero();
      failedNaming(job, r, victim, "A", "B", "C");
    }
    // Rank 2 reads from rank 1 in the ring: it gets rank 1's abort frame itself.
    assertThat(job.failure(2, "A").message()).contains("rank 1: the process group was aborted by the application");
  }

  @Test
  void afterAnAbortEveryRankAbortsAndANewGroupOnTheSameStoreAllReducesExactly() throws Exception {
    int size = 3;
    int victim = 1;
    Job job = new Job("recover", size, victim);
    for (int r = 0; r < size; r++) {
      assertThat(job.exit(r)).as("rank %d; output: %s", r, job.all()).isZero();
      assertThat(job.out(r)).contains("rank " + r + " op warmup returned " + sum(0, size),
          "rank " + r + " new group: rank " + r + " of " + size + ", open=true, new transport id=true",
          "rank " + r + " op round4 returned " + sum(4, size), "rank " + r + " done");
    }
    assertThat(job.out(victim)).contains(
        "rank 1 aborted twice, closed=true, next collective: java.lang.IllegalStateException");
    for (int r : survivors(size, victim)) {
      failedNaming(job, r, victim, "A", "B", "C");
      assertThat(job.out(r)).contains("rank " + r + " aborted, closed=true");
    }
  }

  // ------------------------------------------------------------------ through shared memory (the default on one host)

  @Test
  void sharedMemoryRankKilledWithSigkillWhileThePeersWaitInAWindowFailsThemNamingIt() throws Exception {
    int size = 3;
    int victim = 1;
    Job job = new Job(true, "kill", size, victim);
    job.await(victim, s -> s.equals("rank 1 ready"));
    for (int r : survivors(size, victim)) {
      job.await(r, s -> s.equals("rank " + r + " pending"));
    }
    kill("KILL", job.pid(victim));
    assertThat(job.exit(victim)).isEqualTo(137);
    for (int r : survivors(size, victim)) {
      assertThat(job.exit(r)).as("rank %d; output: %s", r, job.all()).isZero();
      assertThat(job.out(r)).contains("rank " + r + " op warmup returned " + sum(0, size));
      failedNaming(job, r, victim, "A", "B", "C");
    }
  }

  /**
   * Ranks sharing memory make no TCP connection until a collective needs one: a rank killed before its first makes
   * every peer fail naming it within {@link #PROMPT} — the one that dials it (refused), and the one that waits for
   * it to connect (its pid, which the segments give, is gone) — even with a long timeout.
   */
  @ParameterizedTest(name = "victim {0}")
  @ValueSource(ints = {0, 1})
  void sharedMemoryRankKilledBeforeItsFirstConnectionIsNamedPromptlyByEveryPeer(int victim) throws Exception {
    int size = 3;
    Path killed = tmp.resolve("killed");
    Job job = new Job(true, "kill-before-connecting", size, victim, LONG_TIMEOUT, killed.toString());
    job.await(victim, s -> s.equals("rank " + victim + " ready"));
    kill("KILL", job.pid(victim));
    assertThat(job.exit(victim)).isEqualTo(137);
    Files.writeString(killed, "killed");
    for (int r : survivors(size, victim)) {
      assertThat(job.exit(r)).as("rank %d; output: %s", r, job.all()).isZero();
      Failure f = job.failure(r, "A");
      assertThat(f.type()).as("rank %d: %s", r, f).isEqualTo(PeerFailureException.class.getName());
      assertThat(f.failedRank()).as("rank %d: %s", r, f).isEqualTo(victim);
      assertThat(f.millis()).as("rank %d: %s", r, f).isLessThan(PROMPT.toMillis());
    }
  }

  /**
   * One rank all-reduces (a shared-memory window) while the others broadcast (a chain over TCP) as the same
   * collective: with the default validation every rank fails with a mismatch within {@link #PROMPT}, naming both
   * collectives — none waits for its timeout, and none returns.
   */
  @Test
  void sharedMemoryAllReduceAgainstBroadcastIsAMismatchOnEveryRankPromptly() throws Exception {
    int size = 3;
    int victim = 1;
    Job job = new Job(true, "allreduce-against-broadcast", size, victim, LONG_TIMEOUT);
    for (int r = 0; r < size; r++) {
      assertThat(job.exit(r)).as("rank %d; output: %s", r, job.all()).isZero();
      // The root's broadcast needs nobody to send to it, so it may return first; then its next collective fails.
      Failure f = r == 0 && job.out(r).stream().anyMatch(s -> s.startsWith("rank 0 op A returned"))
          ? job.failure(r, "B") : job.failure(r, "A");
      assertThat(f.type()).as("rank %d: %s", r, f).isEqualTo(CollectiveMismatchException.class.getName());
      assertThat(f.message()).as("rank %d", r).contains("ALLREDUCE").contains("BROADCAST");
      assertThat(f.millis()).as("rank %d: %s", r, f).isLessThan(PROMPT.toMillis());
    }
  }

  /**
   * Host-mates whose settings choose different algorithms for one collective (one forced to the ring over TCP, the
   * others in a shared-memory window) would each wait for the other in vain: every rank fails within
   * {@link #PROMPT}, saying the settings differ.
   */
  @Test
  void sharedMemoryRanksWhoseSettingsChooseDifferentAlgorithmsFailPromptlySayingSo() throws Exception {
    int size = 3;
    int victim = 2;
    Job job = new Job(true, "allreduce-both-ways", size, victim, LONG_TIMEOUT, Map.of("NCCL4J_CPU_ALGO", "ring"));
    for (int r = 0; r < size; r++) {
      assertThat(job.exit(r)).as("rank %d; output: %s", r, job.all()).isZero();
      Failure f = job.failure(r, "A");
      assertThat(f.type()).as("rank %d: %s", r, f).isEqualTo(CollectiveMismatchException.class.getName());
      assertThat(f.message()).as("rank %d", r).contains("chose different algorithms").contains("ALLREDUCE #");
      assertThat(f.millis()).as("rank %d: %s", r, f).isLessThan(PROMPT.toMillis());
    }
  }

  /**
   * Two ranks die: each survivor knows both ({@code failedRanks()}), not only the one its failed collective named; a
   * shrink that leaves one of them in is refused, saying which; the shrink of both gives a group whose collectives
   * are exact.
   */
  @ParameterizedTest(name = "shared memory {0}")
  @ValueSource(booleans = {true, false})
  void twoDeadRanksAreBothKnownAndTheShrinkOfBothWorks(boolean sharedMemory) throws Exception {
    int size = 4;
    Path killed = tmp.resolve("killed");
    Job job = new Job(sharedMemory, "two-die-then-shrink", size, 2, LONG_TIMEOUT, Map.of(), killed.toString());
    for (int victim : new int[] {2, 3}) {
      job.await(victim, s -> s.equals("rank " + victim + " ready"));
      kill("KILL", job.pid(victim));
      assertThat(job.exit(victim)).isEqualTo(137);
    }
    Files.writeString(killed, "killed");
    for (int r : new int[] {0, 1}) {
      assertThat(job.exit(r)).as("rank %d; output: %s", r, job.all()).isZero();
      assertThat(job.failure(r, "A").type()).as("rank %d", r).isEqualTo(PeerFailureException.class.getName());
      assertThat(job.out(r)).as("rank %d; output: %s", r, job.all())
          .contains("rank " + r + " failedRanks [2, 3]")
          .anyMatch(s -> s.startsWith("rank " + r + " shrink of the last rank only: refused: ")
              && s.contains("rank 2 has failed too") && s.endsWith("shrink(2, 3)"))
          // A group of ranks 0 and 1: round 8's sum over them.
          .contains("rank " + r + " op shrunk returned " + sum(8, 2));
    }
  }

  @Test
  void sharedMemoryRankThrowingBetweenCollectivesFailsEveryPeerNamingIt() throws Exception {
    int size = 3;
    int victim = 1;
    Job job = new Job(true, "throw", size, victim);
    assertThat(job.exit(victim)).as("uncaught exception: status 1; output: %s", job.all()).isEqualTo(1);
    for (int r : survivors(size, victim)) {
      assertThat(job.exit(r)).as("rank %d; output: %s", r, job.all()).isZero();
      failedNaming(job, r, victim, "A", "B", "C");
      assertThat(job.failure(r, "A").message()).contains("rank 1 throws between collectives");
    }
  }


  @Test
  void sharedMemoryRankThrowingBeforeJoiningTimesTheOthersOutNamingIt() throws Exception {
    int size = 3;
    int victim = 1;
    Job job = new Job(true, "throw-before-joining", size, victim);
    assertThat(job.exit(victim)).as("output: %s", job.all()).isEqualTo(1);
    for (int r : survivors(size, victim)) {
      assertThat(job.exit(r)).as("rank %d; output: %s", r, job.all()).isZero();
      for (String op : List.of("A", "B", "C")) {
        Failure f = job.failure(r, op);
        assertThat(f.type()).as("rank %d op %s: %s", r, op, f).isEqualTo(CollectiveTimeoutException.class.getName());
        assertThat(f.message()).as("rank %d op %s", r, op).contains("Watchdog caught collective operation timeout")
            .contains("rank 1 to join the group");
        assertThat(f.millis()).as("rank %d op %s: %s", r, op, f).isLessThan(TIMEOUT.multipliedBy(2).toMillis());
      }
    }
    // No window ever opened, so no peer removed the survivors' files: each removed its own at exit.
    assertThat(job.identity.segments()).as("the job's segments left in /dev/shm").isEmpty();
  }

  /**
   * A host-mate frozen inside a window (SIGSTOP after every rank arrived, by the fault-injection property): the
   * others, done with their part, wait to leave it — and time out within twice the timeout, naming the stopped
   * rank and what it is, instead of waiting for as long as it stays stopped.
   */
  @Test
  void sharedMemoryRankStoppedInsideAWindowTimesTheOthersOutAsTheyLeaveNamingIt() throws Exception {
    int size = 3;
    int victim = 1;
    Job job = new Job(true, "stop-in-window", size, victim, TIMEOUT,
        Map.of("JAVA_TOOL_OPTIONS", "-Dnccl4j.fault.stopInWindow=4"));
    try {
      // The victim says which window it stops in (ALLREDUCE #n): the survivors must name that one.
      String stopped = job.await(victim, s -> s.startsWith("nccl4j.fault.stopInWindow: stopping inside window #4 ("));
      String collective = stopped.substring(stopped.indexOf('(') + 1, stopped.lastIndexOf(')'));
      for (int r : survivors(size, victim)) {
        assertThat(job.exit(r)).as("rank %d; output: %s", r, job.all()).isZero();
        Failure f = job.failure(r, "A");
        assertThat(f.type()).as("rank %d: %s", r, f).isEqualTo(CollectiveTimeoutException.class.getName());
        assertThat(f.message()).as("rank %d; output: %s", r, job.all())
            .contains("Watchdog caught collective operation timeout")
            .contains("waiting for rank 1 (pid " + job.pid(victim) + ", stopped: SIGSTOP or a debugger) to leave its"
                + " window of " + collective + " ");
        assertThat(f.millis()).as("rank %d: %s", r, f).isLessThan(TIMEOUT.multipliedBy(2).toMillis());
      }
    } finally {
      resumeAndKill(job.ps.get(victim));
    }
  }

  /**
   * A host-mate whose main thread — the one that ran its collectives — waits on a thread of its own that computes:
   * the peers time out on it and say it is busy, naming that thread, not "asleep" (the process's state, which is its
   * main thread's).
   */
  @Test
  void sharedMemoryRankBusyInAnotherThreadIsCalledBusyByThePeersThatTimeOut() throws Exception {
    int size = 3;
    int victim = 1;
    Job job = new Job(true, "busy-elsewhere", size, victim);
    try {
      job.await(victim, s -> s.equals("rank " + victim + " busy"));
      for (int r : survivors(size, victim)) {
        assertThat(job.exit(r)).as("rank %d; output: %s", r, job.all()).isZero();
        Failure f = job.failure(r, "A");
        assertThat(f.type()).as("rank %d: %s", r, f).isEqualTo(CollectiveTimeoutException.class.getName());
        assertThat(f.message()).as("rank %d", r)
            .containsPattern("waiting for rank 1 \\(pid " + job.pid(victim) + ", running: its threads? [^)]*"
                + "\"busy-worker\"[^)]* busy, or waiting for a core\\) to reach ALLREDUCE #2");
      }
    } finally {
      job.ps.get(victim).destroyForcibly();
    }
  }

  @Test
  void sharedMemoryRankStoppedGivesEveryPeerATimeoutNamingIt() throws Exception {
    int size = 3;
    int victim = 1;
    Path go = tmp.resolve("go");
    Job job = new Job(true, "stop-staggered", size, victim, go.toString());
    for (int r = 0; r < size; r++) {
      int rank = r;
      job.await(r, s -> s.equals("rank " + rank + " ready"));
    }
    kill("STOP", job.pid(victim));
    try {
      Files.writeString(go, "go");
      for (int r : survivors(size, victim)) {
        assertThat(job.exit(r)).as("rank %d; output: %s", r, job.all()).isZero();
        Failure f = job.failure(r, "A");
        assertThat(f.type()).as("rank %d: %s", r, f).isEqualTo(CollectiveTimeoutException.class.getName());
        assertThat(f.message()).contains("Watchdog caught collective operation timeout")
            .containsPattern("waiting for rank 1 \\(pid \\d+, stopped: SIGSTOP or a debugger\\) to reach ALLREDUCE #2");
        assertThat(f.millis()).isLessThan(TIMEOUT.multipliedBy(2).toMillis());
      }
    } finally {
      resumeAndKill(job.ps.get(victim));
    }
  }
}
