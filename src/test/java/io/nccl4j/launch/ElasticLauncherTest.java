package io.nccl4j.launch;

import static org.assertj.core.api.Assertions.assertThat;

import io.nccl4j.testing.TestJob;
import io.nccl4j.testing.TestTime;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The launcher hosts the job's store and names the failure the store recorded first: under {@code ./nccl4j run
 * --on-failure=continue}, rank 0's death (SIGKILL) leaves the store up, so the three survivors shrink their group
 * to themselves and finish exact collectives, each element checked; and a rank that failed first but exited last
 * is the one the launcher blames, not the rank that exited first with an exception of its own that names no rank.
 * Each job has an identity of its own ({@link TestJob}), so that the segments checked are its own.
 */
@Tag("multiprocess")
class ElasticLauncherTest {
  /** Guards against a hang only. */
  private static final Duration GUARD = TestTime.seconds(240);
  /** The groups' timeout: nothing here waits for it, the failures are detected when they happen. */
  private static final Duration GROUP_TIMEOUT = TestTime.seconds(60);

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

  @Test
  void underRunWithOnFailureContinueTheSurvivorsOfRankZerosDeathShrinkAndFinishExactly() throws Exception {
    TestJob job = TestJob.create("elastic");
    List<String> cmd = ChildJvms.jvm(System.getProperty("java.class.path"));
    cmd.addAll(List.of(io.nccl4j.cli.Cli.class.getName(), "run", "--nproc-per-node", "4", "--on-failure=continue",
        "--class", ElasticMains.ShrinkAfterRankZeroDies.class.getName(),
        "--classpath", System.getProperty("nccl4j.test.classes"), "--",
        Long.toString(GROUP_TIMEOUT.toMillis()), "1003", "8"));
    Map<String, String> vars = new HashMap<>(job.environment());
    vars.put("NCCL4J_JAVA_OPTS", "-Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1");
    Path log = tmp.resolve("run.txt");
    Process run = children.start(ChildJvms.rank(cmd, vars).redirectOutput(log.toFile()));
    assertThat(run.waitFor(GUARD.toSeconds(), TimeUnit.SECONDS)).as("the launcher ended").isTrue();
    List<String> out = Files.readAllLines(log);
    String all = String.join("\n", out);

    assertThat(out).as(all).anyMatch(s -> s.startsWith("[rank 0] rank 0 pid ") && s.endsWith(" sends itself SIGKILL"));
    for (int r = 0; r < 4; r++) {
      assertThat(out).as(all).contains("[rank " + r + "] rank " + r + " first all-reduce: 0 wrong");
    }
    for (int r = 1; r < 4; r++) {
      assertThat(out).as(all).contains("[rank " + r + "] rank " + r + " caught PeerFailureException failedRank=0",
          "[rank " + r + "] survivor " + r + ": rank " + (r - 1) + " of 3, 8 collectives, 0 wrong, failed rank 0");
    }
    assertThat(out).as(all).contains(
        "nccl4j run: rank 0 was killed by signal 9 (SIGKILL); the other ranks go on (--on-failure=continue)",
        "nccl4j run: failed: rank 0 was killed by signal 9 (SIGKILL)",
        "nccl4j run: the other ranks went on (--on-failure=continue): ranks 1, 2, 3 exited with status 0");
    assertThat(run.exitValue()).as("the failure is still reported: a rank died; " + all).isEqualTo(3);
    assertThat(job.segments()).as("the job's segments in /dev/shm").isEmpty();
  }

  /** One node's launcher, its output and status. */
  private record Node(Launcher launcher, ByteArrayOutputStream out, ByteArrayOutputStream err) {
    static Node of(Launcher l) {
      ByteArrayOutputStream out = new ByteArrayOutputStream();
      ByteArrayOutputStream err = new ByteArrayOutputStream();
      l.output(new PrintStream(out, true, StandardCharsets.UTF_8), new PrintStream(err, true, StandardCharsets.UTF_8));
      return new Node(l, out, err);
    }

    List<String> outLines() {
      return out.toString(StandardCharsets.UTF_8).lines().toList();
    }

    List<String> errLines() {
      return err.toString(StandardCharsets.UTF_8).lines().toList();
    }
  }

  /**
   * Two nodes of two ranks (two launchers here, on the loopback): node 0's launcher hosts the store, and keeps it up
   * until node 1's launcher is done. Rank 0 dies; ranks 1 (node 0), 2 and 3 (node 1) shrink and finish exactly, and
   * node 1's launcher, whose ranks all succeeded, reads the failure node 0's published.
   */
  @Test
  void acrossTwoNodesNodeZerosLauncherHostsTheStoreForTheSurvivorsOfEveryNode() throws Exception {
    TestJob job = TestJob.create("elastic-nodes");
    int port = Launcher.freePort();
    List<Node> nodes = new ArrayList<>();
    List<CompletableFuture<Integer>> runs = new ArrayList<>();
    for (int node = 0; node < 2; node++) {
      Node n = Node.of(new Launcher(ChildJvms.javaCommand(ElasticMains.ShrinkAfterRankZeroDies.class,
          Long.toString(GROUP_TIMEOUT.toMillis()), "1003", "8")).nprocPerNode(2).nodes(2, node)
          .master("127.0.0.1", port).environment(job.environment()).onFailure(Launcher.OnFailure.CONTINUE));
      nodes.add(n);
      runs.add(CompletableFuture.supplyAsync(n.launcher()::run));
    }
    int status0 = runs.get(0).get(GUARD.toSeconds(), TimeUnit.SECONDS);
    int status1 = runs.get(1).get(GUARD.toSeconds(), TimeUnit.SECONDS);
    String all = "node 0:\n" + String.join("\n", nodes.get(0).outLines()) + "\n" + String.join("\n",
        nodes.get(0).errLines()) + "\nnode 1:\n" + String.join("\n", nodes.get(1).outLines()) + "\n"
        + String.join("\n", nodes.get(1).errLines());

    for (int r = 1; r < 4; r++) {
      assertThat(nodes.get(r / 2).outLines()).as(all).contains("[rank " + r + "] survivor " + r + ": rank " + (r - 1)
          + " of 3, 8 collectives, 0 wrong, failed rank 0");
    }
    assertThat(nodes.get(0).errLines()).as(all).contains("nccl4j run: failed: rank 0 was killed by signal 9 (SIGKILL)",
        "nccl4j run: the other ranks went on (--on-failure=continue): rank 1 exited with status 0");
    assertThat(status0).as(all).isEqualTo(137);
    assertThat(nodes.get(1).errLines()).as(all).anyMatch(l -> l.startsWith("nccl4j run: every rank of this node exited"
        + " with status 0; the job's store records an earlier failure: rank 0 "));
    assertThat(status1).as(all).isZero();
    assertThat(job.segments()).as("the job's segments in /dev/shm").isEmpty();
  }

  /**
   * Node 0's launcher of a two-node job whose node 1 never comes: its ranks end (they need no store here), and it
   * does not keep the store up for a launcher that never joined (the exit barrier's 300 s are for those that did).
   */
  @Test
  void nodeZerosLauncherDoesNotWaitForANodeThatNeverCame() throws Exception {
    Node n = Node.of(new Launcher(ChildJvms.javaCommand(RankMains.PrintEnv.class)).nprocPerNode(1).nodes(2, 0)
        .master("127.0.0.1", Launcher.freePort()));
    int status = CompletableFuture.supplyAsync(n.launcher()::run).get(TestTime.seconds(120).toSeconds(),
        TimeUnit.SECONDS);
    assertThat(status).as(String.join("\n", n.errLines())).isZero();
    assertThat(n.outLines()).anyMatch(l -> l.startsWith("[rank 0] env ") && l.contains(" WORLD_SIZE=2 "));
    assertThat(n.errLines()).noneMatch(l -> l.contains("stays up until the launchers of the other nodes"));
  }

  @Test
  void theLauncherBlamesTheRankThatFailedFirstNotTheFirstToExit() throws Exception {
    TestJob job = TestJob.create("blame");
    String message = "rank 2 found its input corrupt (distinctive 51c9)";
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    ByteArrayOutputStream err = new ByteArrayOutputStream();
    PrintStream o = new PrintStream(out, true, StandardCharsets.UTF_8);
    PrintStream e = new PrintStream(err, true, StandardCharsets.UTF_8);
    Launcher launcher = new Launcher(ChildJvms.javaCommand(ElasticMains.FailsFirstExitsLast.class,
        Long.toString(GROUP_TIMEOUT.toMillis()), tmp.toString(), message)).nprocPerNode(3)
        .grace(TestTime.seconds(30)).environment(job.environment()).output(o, e);
    int status = CompletableFuture.supplyAsync(launcher::run).get(GUARD.toSeconds(), TimeUnit.SECONDS);
    List<String> outLines = out.toString(StandardCharsets.UTF_8).lines().toList();
    List<String> errLines = err.toString(StandardCharsets.UTF_8).lines().toList();
    List<String> both = new ArrayList<>(outLines);
    both.add("--- stderr ---");
    both.addAll(errLines);
    String all = String.join("\n", both);

    assertThat(outLines).as(all).contains("[rank 2] rank 2 throws", "[rank 0] rank 0 caught PeerFailureException"
        + " failedRank=2", "[rank 1] rank 1 caught PeerFailureException failedRank=2");
    // Rank 0 or 1 exits first, with its own exception, which names no rank: rank 2 is still alive then.
    assertThat(errLines).as(all).anyMatch(s -> s.equals("nccl4j run: rank 0 exited with status 1; stopping the other"
        + " ranks") || s.equals("nccl4j run: rank 1 exited with status 1; stopping the other ranks"));
    assertThat(errLines).as(all).anyMatch(s -> s.startsWith("nccl4j run: failed: rank 2 ")
        && s.contains("java.lang.IllegalStateException: " + message)
        && s.contains("(the first failure the job's store records; rank "));
    assertThat(errLines).as(all).noneMatch(s -> s.startsWith("nccl4j run: failed: rank 0")
        || s.startsWith("nccl4j run: failed: rank 1"));
    assertThat(status).as(all).isEqualTo(1);
  }
}
