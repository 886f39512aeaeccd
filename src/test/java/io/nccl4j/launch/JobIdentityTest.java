package io.nccl4j.launch;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowable;

import io.nccl4j.BackendException;
import io.nccl4j.DType;
import io.nccl4j.ReduceOp;
import io.nccl4j.Tensor;
import io.nccl4j.Validation;
import io.nccl4j.store.JobIdentity;
import io.nccl4j.store.TcpStore;
import io.nccl4j.testing.TestTime;
import java.net.InetAddress;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * A job has an identity: a second job started on the port another job holds fails within seconds
 * with a message naming the port, and the first job goes on. Both jobs run in this JVM, their ranks as threads,
 * each through {@link ProcessGroups#init} as a process would. Timeouts are 60 s; "within seconds" is asserted as
 * well under 20 s.
 */
@Tag("multirank")
@Tag("multiprocess")
class JobIdentityTest {
  private static final Duration TIMEOUT = TestTime.seconds(60);
  private static final Duration FAST = TestTime.seconds(20);
  private static final InetAddress LOOPBACK = InetAddress.getLoopbackAddress();

  private static DistEnv rank(int port, int rank, int size) {
    return new DistEnv("127.0.0.1", port, rank, size, rank, size, "torchrun");
  }

  /** Every rank of a two-rank job joins, all-reduces rank + 1 and returns the joined group. */
  private static List<ProcessGroups.Joined> joinAndAllReduce(int port, JobIdentity job) throws Exception {
    List<CompletableFuture<ProcessGroups.Joined>> fs = new ArrayList<>();
    for (int r = 0; r < 2; r++) {
      DistEnv env = rank(port, r, 2);
      fs.add(CompletableFuture.supplyAsync(
          () -> ProcessGroups.init(env, job, LOOPBACK, "cpu", TIMEOUT, Validation.OFF)));
    }
    List<ProcessGroups.Joined> joined = new ArrayList<>();
    for (CompletableFuture<ProcessGroups.Joined> f : fs) {
      joined.add(f.get(TIMEOUT.toSeconds(), TimeUnit.SECONDS));
    }
    assertAllReduce(joined);
    return joined;
  }

  private static void assertAllReduce(List<ProcessGroups.Joined> joined) throws Exception {
    List<CompletableFuture<Long>> sums = new ArrayList<>();
    for (ProcessGroups.Joined j : joined) {
      sums.add(CompletableFuture.supplyAsync(() -> {
        try (Tensor t = Tensor.fromArray(new long[] {j.group().rank() + 1}, DType.INT64, j.group().allocator())) {
          j.group().allReduce(t, ReduceOp.SUM);
          return t.toLongArray()[0];
        }
      }));
    }
    for (CompletableFuture<Long> s : sums) {
      assertThat(s.get(TIMEOUT.toSeconds(), TimeUnit.SECONDS)).isEqualTo(3);
    }
  }

  private static Throwable joinFails(DistEnv env, JobIdentity job) {
    long start = System.nanoTime();
    Throwable e = catchThrowable(() -> ProcessGroups.init(env, job, LOOPBACK, "cpu", TIMEOUT, Validation.OFF));
    assertThat(Duration.ofNanos(System.nanoTime() - start)).as("failed within seconds").isLessThan(FAST);
    return e;
  }

  private static void close(List<ProcessGroups.Joined> joined) {
    for (ProcessGroups.Joined j : joined) {
      j.close();
    }
  }

  @Test
  void aSecondLaunchedJobOnTheFirstJobsPortFailsNamingThePortAndTheFirstGoesOn() throws Exception {
    int port = Launcher.freePort();
    List<ProcessGroups.Joined> first = joinAndAllReduce(port, JobIdentity.create());
    try {
      JobIdentity second = JobIdentity.create();
      Throwable host = joinFails(rank(port, 0, 2), second);
      assertThat(host).isInstanceOf(IllegalStateException.class)
          .hasMessageStartingWith("TCP store: cannot listen on port " + port)
          .hasMessageContaining("another job, holds port " + port);
      Throwable member = joinFails(rank(port, 1, 2), second);
      assertThat(member).isInstanceOf(BackendException.class)
          .hasMessageContaining("refused this process")
          .hasMessageContaining("another job holds port " + port);
      assertAllReduce(first);
    } finally {
      close(first);
    }
  }

  @Test
  void aSecondJobWithTheSameDerivedIdIsCaughtByItsRankClaim() throws Exception {
    // Two torchrun jobs without a run id both derive their id from the address: the store cannot tell them
    // apart, the claim of a rank that is taken can.
    int port = Launcher.freePort();
    DistEnv env = rank(port, 1, 2);
    JobIdentity derived = ProcessGroups.identity(env, Map.of());
    assertThat(derived.id()).isEqualTo("env:127.0.0.1:" + port);
    assertThat(derived.hasToken()).isFalse();
    List<ProcessGroups.Joined> first = joinAndAllReduce(port, derived);
    try {
      // A process of the second job (this JVM caches its own rank 1's connection, so the claim is made by hand).
      long start = System.nanoTime();
      TcpStore second = TcpStore.connect("127.0.0.1", port, TIMEOUT, ProcessGroups.identity(env, Map.of()));
      Throwable claim = catchThrowable(() -> ProcessGroups.claimRank(second, env, derived));
      assertThat(Duration.ofNanos(System.nanoTime() - start)).isLessThan(FAST);
      assertThat(claim).isInstanceOf(IllegalStateException.class)
          .hasMessageStartingWith("rank 1: another process already joined the store at 127.0.0.1:" + port
              + " as rank 1")
          .hasMessageContaining("two processes were given the same rank (two nodes with the same --node-rank?), or"
              + " another job holds port " + port);
      assertAllReduce(first);
    } finally {
      close(first);
    }
  }

  /**
   * The ranks of the job's world that wait for peers that will never come (the other node was launched for another
   * world) fail at once, saying why, instead of at their timeout.
   */
  @Test
  void ranksWaitingForTheirWorldFailAtOnceWhenAProcessOfAnotherWorldJoins() throws Exception {
    int port = Launcher.freePort();
    JobIdentity job = ProcessGroups.identity(rank(port, 0, 2), Map.of());
    ProcessGroups.Joined zero = ProcessGroups.init(rank(port, 0, 2), job, LOOPBACK, "cpu", TIMEOUT, Validation.OFF);
    try {
      CompletableFuture<Throwable> waiting = CompletableFuture.supplyAsync(() -> catchThrowable(() -> {
        try (Tensor t = Tensor.fromArray(new long[] {1}, DType.INT64, zero.group().allocator())) {
          zero.group().allReduce(t, ReduceOp.SUM); // waits for rank 1
        }
      }));
      TcpStore s = TcpStore.connect("127.0.0.1", port, TIMEOUT, job);
      long start = System.nanoTime();
      Throwable claim = catchThrowable(() -> ProcessGroups.claimRank(s, rank(port, 1, 3), job));
      assertThat(claim).hasMessageStartingWith("rank 1: this process was started for a world of 3 ranks");
      Throwable failed = waiting.get(TIMEOUT.toSeconds(), TimeUnit.SECONDS);
      assertThat(Duration.ofNanos(System.nanoTime() - start)).as("rank 0 failed within seconds").isLessThan(FAST);
      assertThat(failed).as("rank 0's allReduce").isNotNull();
      StringBuilder chain = new StringBuilder();
      for (Throwable t = failed; t != null; t = t.getCause()) {
        chain.append(t.getMessage()).append('\n');
      }
      assertThat(chain.toString()).contains("but the job cannot run: a process started for a world of 3 ranks (as"
          + " rank 1) joined the job's store at 127.0.0.1:" + port + ", whose world has 2 ranks: every node must be"
          + " given the same --nnodes and --nproc-per-node");
    } finally {
      zero.close();
    }
  }

  /**
   * Nodes launched with different --nproc-per-node (or --nnodes) make processes of different worlds: the first to
   * join sets the job's, and one of another world fails at once, naming both sizes, without taking a rank.
   */
  @Test
  void aProcessStartedForAnotherWorldSizeFailsAtItsClaimNamingBothAndTakesNoRank() throws Exception {
    int port = Launcher.freePort();
    DistEnv env = rank(port, 1, 2);
    JobIdentity job = ProcessGroups.identity(env, Map.of());
    List<ProcessGroups.Joined> first = joinAndAllReduce(port, job);
    try {
      DistEnv other = rank(port, 2, 3);
      long start = System.nanoTime();
      TcpStore s = TcpStore.connect("127.0.0.1", port, TIMEOUT, job);
      Throwable claim = catchThrowable(() -> ProcessGroups.claimRank(s, other, job));
      assertThat(Duration.ofNanos(System.nanoTime() - start)).isLessThan(FAST);
      assertThat(claim).isInstanceOf(IllegalStateException.class)
          .hasMessage("rank 2: this process was started for a world of 3 ranks (WORLD_SIZE), but the job's store at"
              + " 127.0.0.1:" + port + " (" + job + ") holds a world of '2' ranks, set by the first process to join:"
              + " every node must be given the same --nnodes and --nproc-per-node");
      TcpStore look = TcpStore.connect("127.0.0.1", port, TIMEOUT, job);
      try {
        assertThat(look.check(List.of("nccl4j/rank/2"))).as("rank 2 claimed").isFalse();
      } finally {
        look.close();
      }
      assertAllReduce(first);
    } finally {
      close(first);
    }
  }

  @Test
  void theLauncherGivesEveryRankOfAJobOneFreshIdAndToken() {
    List<String> ids = new ArrayList<>();
    for (int run = 0; run < 2; run++) {
      java.io.ByteArrayOutputStream bytes = new java.io.ByteArrayOutputStream();
      java.io.PrintStream out = new java.io.PrintStream(bytes, true, java.nio.charset.StandardCharsets.UTF_8);
      int status = new Launcher(List.of("sh", "-c", "echo \"$NCCL4J_JOB_ID ${#NCCL4J_JOB_TOKEN}\""))
          .nprocPerNode(2).output(out, out).run();
      assertThat(status).isZero();
      List<String> lines = bytes.toString(java.nio.charset.StandardCharsets.UTF_8).lines()
          .map(l -> l.substring(l.indexOf("] ") + 2)).distinct().toList();
      assertThat(lines).as("both ranks, one identity, a 32-byte token").hasSize(1);
      assertThat(lines.get(0)).matches("[0-9a-f]{16} 64");
      ids.add(lines.get(0));
    }
    assertThat(ids.get(0)).as("two jobs, two ids").isNotEqualTo(ids.get(1));
  }

  @Test
  void theIdComesFromWhatTheLauncherOffers() {
    DistEnv env = rank(29500, 0, 1);
    assertThat(ProcessGroups.identity(env, Map.of("TORCHELASTIC_RUN_ID", "abc")).id()).isEqualTo("torchelastic:abc");
    assertThat(ProcessGroups.identity(env, Map.of("SLURM_JOB_ID", "77", "SLURM_STEP_ID", "3")).id())
        .isEqualTo("slurm:77.3");
    JobIdentity launched = JobIdentity.create();
    JobIdentity read = ProcessGroups.identity(env, launched.environment());
    assertThat(read.id()).isEqualTo(launched.id());
    assertThat(read.hasToken()).isTrue();
    assertThat(read.toString()).doesNotContain(launched.environment().get(JobIdentity.TOKEN_ENV));
    assertThat(catchThrowable(() -> ProcessGroups.identity(env, Map.of(JobIdentity.TOKEN_ENV, "00"))))
        .isInstanceOf(IllegalArgumentException.class).hasMessageStartingWith("NCCL4J_JOB_ID is not set, but");
  }
}
