package io.nccl4j.launch;

import io.nccl4j.DType;
import io.nccl4j.PeerFailureException;
import io.nccl4j.ProcessGroup;
import io.nccl4j.ReduceOp;
import io.nccl4j.Tensor;
import io.nccl4j.Work;
import io.nccl4j.testing.TestTime;
import java.time.Duration;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

/** Rank programs for {@link BlameAcrossProcessesTest}. */
final class BlameMains {
  private BlameMains() {}

  /**
   * {@code args}: group timeout in ms, the victim rank, the victim's message. Every rank joins (CPU
   * backend over TCP) and completes a warm-up all-reduce (so the ring is connected); the peers then
   * issue a second one, and the victim, instead of joining them, throws an IllegalStateException
   * with the message, uncaught, while they wait for it in that collective. Each peer prints what it caught on one line ({@code rank r
   * caught TYPE failedRank=K: MESSAGE}) and throws it on, as an application would. A peer's
   * shutdown waits until it has printed, so that a launcher stopping it cannot cut the line off.
   */
  public static final class ThrowMidCollective {
    public static void main(String[] args) throws Exception {
      Duration timeout = Duration.ofMillis(Long.parseLong(args[0]));
      int victim = Integer.parseInt(args[1]);
      String message = args[2];
      CountDownLatch reported = new CountDownLatch(1);
      Runtime.getRuntime().addShutdownHook(new Thread(() -> {
        try {
          reported.await(TestTime.scaledSeconds(30), TimeUnit.SECONDS);
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
        }
      }));
      DistEnv env = DistEnv.fromEnvironment();
      ProcessGroup pg = ProcessGroups.init(env, "cpu", timeout).group();
      int rank = pg.rank();
      try (Tensor warm = pg.zeros(4, DType.INT64); Tensor t = pg.zeros(1 << 10, DType.INT64)) {
        pg.allReduce(warm, ReduceOp.SUM);
        if (rank == victim) {
          reported.countDown();
          System.out.println("rank " + rank + " throws");
          throw new IllegalStateException(message);
        }
        Work w = pg.allReduceAsync(t, ReduceOp.SUM);
        try {
          w.waitFor();
          System.out.println("rank " + rank + " returned");
        } catch (RuntimeException e) {
          int failed = e instanceof PeerFailureException p ? p.failedRank() : -1;
          System.out.println("rank " + rank + " caught " + e.getClass().getName() + " failedRank=" + failed + ": "
              + e.getMessage().replace('\n', ' '));
          throw e;
        } finally {
          System.out.flush();
          reported.countDown();
        }
      }
    }
  }

  /**
   * {@code args}: group timeout in ms, the path of the test's go file. Every rank joins (CPU backend, as the
   * launcher's ranks do by default), completes a warm-up all-reduce, prints {@code rank r ready pid P} and waits
   * for the go file; the test stops one rank (SIGSTOP) before it creates the file. The others then issue a second
   * all-reduce and time out waiting for the stopped one; the timeout is left uncaught, as an application would.
   */
  public static final class TimeOutOnAStoppedRank {
    public static void main(String[] args) throws Exception {
      Duration timeout = Duration.ofMillis(Long.parseLong(args[0]));
      java.nio.file.Path go = java.nio.file.Path.of(args[1]);
      DistEnv env = DistEnv.fromEnvironment();
      ProcessGroup pg = ProcessGroups.init(env, "cpu", timeout).group();
      int rank = pg.rank();
      try (Tensor warm = pg.zeros(4, DType.INT64); Tensor t = pg.zeros(1 << 10, DType.INT64)) {
        pg.allReduce(warm, ReduceOp.SUM);
        System.out.println("rank " + rank + " ready pid " + ProcessHandle.current().pid());
        System.out.flush();
        io.nccl4j.testing.Waits.await("the test's go file " + go, Duration.ofSeconds(60))
            .until(() -> java.nio.file.Files.exists(go));
        pg.allReduce(t, ReduceOp.SUM);
        System.out.println("rank " + rank + " returned");
      }
    }
  }
}
