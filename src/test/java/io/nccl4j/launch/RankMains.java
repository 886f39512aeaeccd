package io.nccl4j.launch;

import io.nccl4j.DType;
import io.nccl4j.ProcessGroup;
import io.nccl4j.ReduceOp;
import io.nccl4j.Tensor;
import io.nccl4j.testing.TestTime;
import io.nccl4j.testing.Waits;
import java.io.IOException;
import java.time.Duration;
import java.util.Arrays;

/**
 * Programs the multi-process tests run as ranks (each nested class has a {@code main}). They read
 * their place in the job from the environment as a launched rank does, print what the test checks,
 * and exit with a known status. They end with {@link System#exit} so that no thread keeps them alive.
 */
public final class RankMains {
  private RankMains() {}

  /** The ranks' group timeout: a guard, scaled as the test's (TestTime; the test passes its factor). */
  static final Duration TIMEOUT = TestTime.seconds(60);

  /** Rank-encoded input: element i of rank r is {@code 100·(r+1) + i}. */
  static Tensor input(ProcessGroup pg, int count) {
    long[] v = new long[count];
    for (int i = 0; i < count; i++) {
      v[i] = 100L * (pg.rank() + 1) + i;
    }
    return Tensor.fromArray(v, DType.INT64, pg.allocator());
  }

  /** The sum of {@link #input} over {@code p} ranks. */
  static long[] expectedSum(int p, int count) {
    long[] e = new long[count];
    for (int i = 0; i < count; i++) {
      e[i] = 100L * p * (p + 1) / 2 + (long) p * i;
    }
    return e;
  }

  static void killMyself() throws IOException, InterruptedException {
    long pid = ProcessHandle.current().pid();
    new ProcessBuilder("kill", "-9", Long.toString(pid)).inheritIO().start().waitFor();
    Thread.sleep(60_000); // kept: not reached; the signal ends the process while it sleeps
  }

  /** Prints the launcher's variables, one line to stdout and one to stderr. */
  public static final class PrintEnv {
    public static void main(String[] args) {
      System.out.println("env MASTER_ADDR=" + System.getenv("MASTER_ADDR") + " MASTER_PORT="
          + System.getenv("MASTER_PORT") + " RANK=" + System.getenv("RANK") + " WORLD_SIZE="
          + System.getenv("WORLD_SIZE") + " LOCAL_RANK=" + System.getenv("LOCAL_RANK") + " LOCAL_WORLD_SIZE="
          + System.getenv("LOCAL_WORLD_SIZE") + " GROUP_RANK=" + System.getenv("GROUP_RANK") + " EXTRA="
          + System.getenv("NCCL4J_TEST_EXTRA") + " args=" + Arrays.toString(args));
      System.err.println("to stderr from " + System.getenv("RANK"));
      System.out.flush();
      System.exit(0);
    }
  }

  /** Joins a CPU group, all-reduces 6 elements, prints the result; every rank exits 0. */
  public static final class AllReduce {
    public static void main(String[] args) {
      DistEnv env = DistEnv.fromEnvironment();
      try (ProcessGroups.Joined j = ProcessGroups.init(env, "cpu", TIMEOUT);
           Tensor t = input(j.group(), 6)) {
        j.group().allReduce(t, ReduceOp.SUM);
        System.out.println("source=" + env.source() + " rank=" + env.rank() + " size=" + env.worldSize()
            + " localRank=" + env.localRank() + " localSize=" + env.localWorldSize() + " port="
            + env.masterPort() + " result=" + Arrays.toString(t.toLongArray()));
        // Rank 0 hosts the store: it waits until every rank has read it before leaving.
        j.store().set("done/" + env.rank(), new byte[] {1});
        if (env.rank() == 0) {
          java.util.List<String> keys = new java.util.ArrayList<>();
          for (int r = 0; r < env.worldSize(); r++) {
            keys.add("done/" + r);
          }
          j.store().wait(keys, TIMEOUT);
        }
      }
      System.out.flush();
      System.exit(0);
    }
  }

  /**
   * For a launcher that restarts failed jobs (torchrun): in the first attempt every rank all-reduces
   * once, then rank 1 exits with status 1; in the next attempt every rank all-reduces and reports, with
   * the attempt number, as {@link AllReduce} does.
   */
  public static final class FailFirstAttempt {
    public static void main(String[] args) throws Exception {
      DistEnv env = DistEnv.fromEnvironment();
      int attempt = Integer.parseInt(System.getenv().getOrDefault("TORCHELASTIC_RESTART_COUNT", "0"));
      try (ProcessGroups.Joined j = ProcessGroups.init(env, "cpu", TIMEOUT);
           Tensor t = input(j.group(), 6)) {
        j.group().allReduce(t, ReduceOp.SUM);
        if (attempt == 0) {
          System.out.println("attempt=0 rank=" + env.rank() + " result=" + Arrays.toString(t.toLongArray()));
          System.out.flush();
          if (env.rank() == 1) {
            Runtime.getRuntime().halt(1);
          }
          // The others wait for the launcher to stop them (it restarts the job when rank 1 fails): kept, the
          // scenario is a rank that hangs until stopped.
          Thread.sleep(TIMEOUT.toMillis());
          System.exit(2);
        }
        System.out.println("attempt=" + attempt + " rank=" + env.rank() + " size=" + env.worldSize()
            + " result=" + Arrays.toString(t.toLongArray()));
        j.store().set("done/" + env.rank(), new byte[] {1});
        java.util.List<String> keys = new java.util.ArrayList<>();
        for (int r = 0; r < env.worldSize(); r++) {
          keys.add("done/" + r);
        }
        j.store().wait(keys, TIMEOUT);
      }
      System.out.flush();
      System.exit(0);
    }
  }

  /**
   * Creates two groups in turn (store namespaces pg1 and pg2), the second while the first is still
   * open: both all-reduce with different data, then the first one again.
   */
  public static final class TwoGroups {
    public static void main(String[] args) {
      DistEnv env = DistEnv.fromEnvironment();
      ProcessGroups.Joined first = ProcessGroups.init(env, "cpu", TIMEOUT);
      ProcessGroups.Joined second = ProcessGroups.init(env, "cpu", TIMEOUT);
      try (Tensor a = input(first.group(), 3);
           Tensor b = Tensor.fromArray(new long[] {env.rank() + 1L, 10L * (env.rank() + 1)}, DType.INT64,
               second.group().allocator())) {
        second.group().allReduce(b, ReduceOp.MAX);
        first.group().allReduce(a, ReduceOp.SUM);
        first.group().allReduce(a, ReduceOp.SUM);
        System.out.println("rank " + env.rank() + " first " + Arrays.toString(a.toLongArray()) + " second "
            + Arrays.toString(b.toLongArray()));
        first.store().set("done/" + env.rank(), new byte[] {1});
        if (env.rank() == 0) {
          java.util.List<String> keys = new java.util.ArrayList<>();
          for (int r = 0; r < env.worldSize(); r++) {
            keys.add("done/" + r);
          }
          first.store().wait(keys, TIMEOUT);
        }
      }
      second.close();
      first.close();
      System.out.flush();
      System.exit(0);
    }
  }

  /**
   * Rank 2 exits with status 3 before joining; the others join and all-reduce, which cannot finish
   * without rank 2: the launcher has to stop them.
   */
  public static final class Rank2ExitsWith3 {
    public static void main(String[] args) {
      DistEnv env = DistEnv.fromEnvironment();
      if (env.rank() == 2) {
        System.out.println("rank 2 leaving with status 3");
        System.out.flush();
        System.exit(3);
      }
      try (ProcessGroups.Joined j = ProcessGroups.init(env, "cpu", TIMEOUT);
           Tensor t = input(j.group(), 4)) {
        System.out.println("joined, all-reducing");
        j.group().allReduce(t, ReduceOp.SUM);
        System.out.println("all-reduce returned " + Arrays.toString(t.toLongArray()));
      } catch (RuntimeException e) {
        System.out.println("all-reduce failed: " + e);
      }
      System.exit(0);
    }
  }

  /** Rank 1 kills itself with SIGKILL; the others sleep until stopped. */
  public static final class Rank1KillsItself {
    public static void main(String[] args) throws Exception {
      DistEnv env = DistEnv.fromEnvironment();
      if (env.rank() == 1) {
        System.out.println("rank 1 pid " + ProcessHandle.current().pid() + " sends itself SIGKILL");
        System.out.flush();
        killMyself();
      }
      Thread.sleep(120_000); // kept: the scenario is ranks busy until the launcher stops them
      System.exit(0);
    }
  }

  /**
   * Two ranks: both all-reduce once; then rank 1 dies by SIGKILL, and rank 0's next all-reduce must
   * fail naming rank 1. Rank 0 prints the exception and exits 0. With the argument {@code pending},
   * rank 1 dies while rank 0 is already waiting in the second all-reduce; otherwise rank 0 starts it
   * after rank 1 is gone.
   */
  public static final class PeerDies {
    public static void main(String[] args) throws Exception {
      boolean pending = args.length > 0 && args[0].equals("pending");
      DistEnv env = DistEnv.fromEnvironment();
      ProcessGroups.Joined j = ProcessGroups.init(env, "cpu", TIMEOUT);
      ProcessGroup pg = j.group();
      Tensor t = input(pg, 8);
      pg.allReduce(t, ReduceOp.SUM);
      System.out.println("rank " + env.rank() + " first all-reduce " + Arrays.toString(t.toLongArray()));
      System.out.flush();
      if (env.rank() == 1) {
        j.store().set("rank1/pid", Long.toString(ProcessHandle.current().pid()).getBytes());
        if (pending) {
          // Wait until rank 0 is inside its second all-reduce (it says so once the collective has started).
          j.store().get("rank0/waiting", TIMEOUT);
        }
        killMyself();
      }
      long peer = Long.parseLong(new String(j.store().get("rank1/pid", TIMEOUT)));
      if (!pending) {
        // Rank 1 is gone before rank 0 starts its next collective.
        Waits.await("rank 1 (pid " + peer + ") gone", Duration.ofSeconds(60)).until(() ->
            !ProcessHandle.of(peer).map(ProcessHandle::isAlive).orElse(false) || isZombie(peer));
      }
      long start = System.nanoTime();
      try {
        io.nccl4j.Work w = pg.allReduceAsync(t, ReduceOp.SUM);
        if (pending) {
          Waits.untilStarted(pg, w);
        }
        j.store().set("rank0/waiting", new byte[] {1});
        w.waitFor();
        System.out.println("second all-reduce returned " + Arrays.toString(t.toLongArray()));
      } catch (RuntimeException e) {
        System.out.println("caught " + e.getClass().getName() + ": " + e.getMessage());
        System.out.println("detected after " + (System.nanoTime() - start) / 1_000_000 + " ms");
      }
      System.out.flush();
      System.exit(0);
    }
  }

  static boolean isZombie(long pid) {
    try {
      String stat = java.nio.file.Files.readString(java.nio.file.Path.of("/proc/" + pid + "/stat"));
      return stat.substring(stat.lastIndexOf(')') + 2).startsWith("Z");
    } catch (IOException | RuntimeException e) {
      return true;
    }
  }

  /**
   * Rank 1 ignores SIGTERM (a shutdown hook that never ends), then writes the marker file
   * {@code args[0]}; rank 0 waits for the marker and exits with status 1. The launcher must
   * escalate to SIGKILL after its grace period.
   */
  public static final class Rank1IgnoresSigterm {
    public static void main(String[] args) throws Exception {
      java.nio.file.Path marker = java.nio.file.Path.of(args[0]);
      DistEnv env = DistEnv.fromEnvironment();
      if (env.rank() == 1) {
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
          try {
            Thread.sleep(300_000); // kept: the scenario is a hook that never ends
          } catch (InterruptedException e) {
            // killed
          }
        }));
        System.out.println("pid " + ProcessHandle.current().pid());
        System.out.flush();
        java.nio.file.Files.writeString(marker, "ready");
        Thread.sleep(300_000); // kept: the scenario is a rank that goes on until killed
        System.exit(0);
      }
      Waits.await("rank 1's marker " + marker, Duration.ofSeconds(60)).until(() -> java.nio.file.Files.exists(marker));
      System.out.println("rank 0 fails now");
      System.out.flush();
      System.exit(1);
    }
  }

  /** Prints its PID, then sleeps {@code args[0]} seconds (default 300). */
  public static final class PrintPidAndSleep {
    public static void main(String[] args) throws Exception {
      System.out.println("pid " + ProcessHandle.current().pid());
      System.out.flush();
      Thread.sleep(1000L * (args.length > 0 ? Integer.parseInt(args[0]) : 300)); // kept: the scenario
      System.exit(0);
    }
  }
}
