package io.nccl4j.launch;

import io.nccl4j.DType;
import io.nccl4j.PeerFailureException;
import io.nccl4j.ProcessGroup;
import io.nccl4j.ReduceOp;
import io.nccl4j.Tensor;
import io.nccl4j.Validation;
import io.nccl4j.Work;
import io.nccl4j.store.JobIdentity;
import io.nccl4j.store.Store;
import io.nccl4j.testing.InterceptingStore;
import io.nccl4j.testing.Waits;
import java.net.InetAddress;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;

/**
 * The rank program of {@code RankFailureProcessTest}: every rank runs {@link Scenario} with the
 * same arguments (scenario, group timeout in ms, victim rank); the victim fails as the scenario
 * says, the survivors run collectives and print, for each, one line the test parses:
 *
 * <pre>
 * rank R op NAME returned [v0, v1, ...]
 * rank R op NAME failed after N ms: CLASS failedRank=F: MESSAGE
 * </pre>
 *
 * N is measured from the moment the survivor issued the operation to the moment it threw; F is
 * {@link PeerFailureException#failedRank()}, or -1 for other exceptions. Inputs: element i of rank
 * r in round k is {@code 100000·k + 1000·r + i}. Every rank ends with {@link System#exit}.
 */
public final class RankFailureMains {
  private RankFailureMains() {}

  static final int COUNT = 6;

  /** Element i of rank r in round k: {@code 100000·k + 1000·r + i}. */
  static long value(int round, int rank, int i) {
    return 100_000L * round + 1000L * rank + i;
  }

  static long[] expectedSum(int round, int size) {
    long[] e = new long[COUNT];
    for (int i = 0; i < COUNT; i++) {
      for (int r = 0; r < size; r++) {
        e[i] += value(round, r, i);
      }
    }
    return e;
  }

  private static Tensor input(ProcessGroup pg, int round) {
    return input(pg, round, COUNT);
  }

  private static Tensor input(ProcessGroup pg, int round, int count) {
    long[] v = new long[count];
    for (int i = 0; i < count; i++) {
      v[i] = value(round, pg.rank(), i);
    }
    return Tensor.fromArray(v, DType.INT64, pg.allocator());
  }

  private static void say(String line) {
    System.out.println(line);
    System.out.flush();
  }

  private static String oneLine(Throwable e) {
    String m = String.valueOf(e.getMessage()).replace('\n', ' ').replace('\r', ' ');
    return e.getClass().getName() + " failedRank="
        + (e instanceof PeerFailureException ? ((PeerFailureException) e).failedRank() : -1) + ": " + m;
  }

  @FunctionalInterface
  private interface Op {
    void run();
  }

  /** Runs {@code op} (issued at {@code issued}) and prints how it ended; true when it returned. */
  private static boolean report(int rank, String name, long issued, Op op, Tensor result) {
    try {
      op.run();
      long[] values = result.count() <= 16 ? result.toLongArray() : result.slice(0, 16).toLongArray();
      say("rank " + rank + " op " + name + " returned " + Arrays.toString(values) + (result.count() <= 16 ? ""
          : " (the first 16 of " + result.count() + ")"));
      return true;
    } catch (RuntimeException e) {
      say("rank " + rank + " op " + name + " failed after " + (System.nanoTime() - issued) / 1_000_000 + " ms: "
          + oneLine(e));
      return false;
    }
  }

  /** An all-reduce every rank completes: it connects the ring before anyone fails. */
  private static void warmUp(ProcessGroup pg) {
    try (Tensor t = input(pg, 0)) {
      report(pg.rank(), "warmup", System.nanoTime(), () -> pg.allReduce(t, ReduceOp.SUM), t);
    }
  }

  /**
   * What a survivor does once the victim is gone: two all-reduces enqueued together (A and B,
   * pending when the failure comes), then one issued after they failed (C).
   */
  private static void survive(ProcessGroup pg, boolean announce) {
    int r = pg.rank();
    try (Tensor a = input(pg, 1); Tensor b = input(pg, 2); Tensor c = input(pg, 3)) {
      long issued = System.nanoTime();
      Work wa = pg.allReduceAsync(a, ReduceOp.SUM);
      Work wb = pg.allReduceAsync(b, ReduceOp.SUM);
      if (announce) {
        say("rank " + r + " pending");
      }
      report(r, "A", issued, wa::waitFor, a);
      report(r, "B", issued, wb::waitFor, b);
      long later = System.nanoTime();
      report(r, "C", later, () -> pg.allReduce(c, ReduceOp.SUM), c);
    }
  }

  /** Rank 0 hosts the store: it stays until every rank named in {@code ranks} has said it is done. */
  private static void leave(Store store, int rank, List<Integer> ranks, Duration timeout) {
    store.set("test/done/" + rank, new byte[] {1});
    if (rank == 0) {
      List<String> keys = new ArrayList<>();
      for (int r : ranks) {
        keys.add("test/done/" + r);
      }
      store.wait(keys, timeout.multipliedBy(3));
    }
    say("rank " + rank + " done");
    System.exit(0);
  }

  /**
   * The victim of {@code die-in-rendezvous}: joins the job's store and makes its group as {@link
   * ProcessGroups#init} does, but halts where its transport would publish its address — after registering its
   * departure notices, before publishing anything. Just before, it sets {@code test/victim-halts}, so that the
   * survivors issue their first collective as it goes and measure how fast they learn of it, not how long it took
   * to start.
   */
  private static void dieInRendezvous(DistEnv env, Duration timeout) {
    Map<String, String> vars = System.getenv();
    JobIdentity job = ProcessGroups.identity(env, vars);
    InetAddress bind = BindAddress.choose(env, vars);
    Store store = ProcessGroups.groupStore(env, job, bind, null, false, timeout);
    Store halting = new InterceptingStore(store, "transport/addr/" + env.rank(), () -> {
      store.set("test/victim-halts", new byte[] {1});
      say("rank " + env.rank() + " halts before publishing its transport address");
      Runtime.getRuntime().halt(1);
    });
    ProcessGroups.join(env, halting, job, bind, "cpu", timeout, Validation.fromEnvironment());
    throw new IllegalStateException("rank " + env.rank() + " made its group, though it halts before publishing");
  }

  private static List<Integer> allBut(int size, int victim) {
    List<Integer> l = new ArrayList<>();
    for (int r = 0; r < size; r++) {
      if (r != victim) {
        l.add(r);
      }
    }
    return l;
  }

  /**
   * {@code args}: scenario, group timeout in ms, victim rank (not 0: rank 0 hosts the store).
   * Scenarios: {@code throw-before-joining} (the victim's main throws before it creates its group),
   * {@code throw-first} (after creating it, before any collective), {@code throw} (after the warm-up),
   * {@code throw-in-try} (after the warm-up, inside try-with-resources over its group), {@code exit} (System.exit(3) before iteration 2
   * of a loop), {@code kill} (the victim prints "ready" and sleeps; the test kills it),
   * {@code stop} (every rank loops over all-reduces; the test stops the victim),
   * {@code stop-staggered} (after the warm-up every rank prints "ready" and waits for the file
   * {@code args[3]}; the test stops the victim, then creates the file; the survivors then enter
   * their collective one after the other, 600 ms apart in ring order, so that the first to time
   * out is the victim's neighbour and the others hear of it before their own deadline), {@code abort}
   * (the victim aborts its group twice instead of the next collective), {@code recover} (as
   * {@code abort}, then every rank aborts and creates a new group for round 4), {@code die-in-rendezvous} (the
   * victim joins the store and halts where its transport would publish its address; the survivors' first
   * collective waits for the victim's last word before that, {@code test/victim-halts}).
   */
  public static final class Scenario {
    public static void main(String[] args) throws Exception {
      String scenario = args[0];
      Duration timeout = Duration.ofMillis(Long.parseLong(args[1]));
      int victim = Integer.parseInt(args[2]);
      DistEnv env = DistEnv.fromEnvironment();
      int rank = env.rank();
      boolean isVictim = rank == victim;
      say("rank " + rank + " pid " + ProcessHandle.current().pid());
      if (isVictim && scenario.equals("throw-before-joining")) {
        say("rank " + rank + " throws");
        throw new IllegalStateException("rank " + rank + " throws before joining the group");
      }
      if (isVictim && scenario.equals("die-in-rendezvous")) {
        dieInRendezvous(env, timeout);
      }
      ProcessGroups.Joined j = ProcessGroups.init(env, "cpu", timeout);
      ProcessGroup pg = j.group();
      List<Integer> survivors = allBut(env.worldSize(), victim);
      switch (scenario) {
        case "throw-before-joining":
        case "throw-first":
          if (isVictim) {
            say("rank " + rank + " throws");
            throw new IllegalStateException("rank " + rank + " throws before its first collective");
          }
          survive(pg, false);
          leave(j.store(), rank, survivors, timeout);
          break;
        case "throw-in-try":
          // The Java idiom: the victim's code throws inside try-with-resources, which closes its group on the way
          // out, before the exception reaches the thread's top.
          if (isVictim) {
            try (ProcessGroups.Joined closing = j) {
              warmUp(closing.group());
              say("rank " + rank + " throws");
              throw new IllegalStateException("rank " + rank + " throws inside try-with-resources");
            }
          }
          warmUp(pg);
          survive(pg, false);
          leave(j.store(), rank, survivors, timeout);
          break;
        case "die-in-rendezvous":
          j.store().get("test/victim-halts", timeout);
          survive(pg, false);
          leave(j.store(), rank, survivors, timeout);
          break;
        case "throw":
          warmUp(pg);
          if (isVictim) {
            say("rank " + rank + " throws");
            throw new IllegalStateException("rank " + rank + " throws between collectives");
          }
          survive(pg, false);
          leave(j.store(), rank, survivors, timeout);
          break;
        case "exit":
          try (Tensor t = pg.empty(COUNT, DType.INT64)) {
            for (int it = 0; it < 4; it++) {
              if (isVictim && it == 2) {
                say("rank " + rank + " exits with status 3 before iteration 2");
                System.exit(3);
              }
              long[] v = new long[COUNT];
              for (int i = 0; i < COUNT; i++) {
                v[i] = value(10 + it, rank, i);
              }
              try (Tensor host = Tensor.fromArray(v, DType.INT64, pg.allocator())) {
                t.copyFrom(host);
              }
              long issued = System.nanoTime();
              if (!report(rank, "iteration" + it, issued, () -> pg.allReduce(t, ReduceOp.SUM), t)) {
                break;
              }
            }
            long later = System.nanoTime();
            report(rank, "C", later, () -> pg.allReduce(t, ReduceOp.SUM), t);
          }
          leave(j.store(), rank, survivors, timeout);
          break;
        case "kill":
          warmUp(pg);
          if (isVictim) {
            say("rank " + rank + " ready");
            Thread.sleep(120_000); // kept: the scenario, a victim alive until the test kills it
            System.exit(0);
          }
          survive(pg, true);
          leave(j.store(), rank, survivors, timeout);
          break;
        case "stop":
          stopLoop(pg, rank);
          leave(j.store(), rank, survivors, timeout);
          break;
        case "kill-before-connecting": {
          // Warm-up through a window (no TCP connection is made between processes sharing memory), then the victim
          // waits to be killed; the survivors broadcast from the victim along the chain (which needs TCP): the next
          // rank waits for the victim to connect, and nobody dials the victim. 128 KiB: above the staging, whose
          // one window would see the victim gone without any TCP.
          warmUp(pg);
          if (isVictim) {
            say("rank " + rank + " ready");
            Thread.sleep(120_000);
            System.exit(0);
          }
          java.nio.file.Path killed = java.nio.file.Path.of(args[3]); // the test writes it once the victim is dead
          while (!java.nio.file.Files.exists(killed)) {
            Thread.sleep(10);
          }
          try (Tensor t = input(pg, 5, 16_384)) {
            report(rank, "A", System.nanoTime(), () -> pg.broadcast(t, victim), t);
          }
          // Not through the store: when the victim is rank 0, the store went with it.
          say("rank " + rank + " done");
          System.exit(0);
          break;
        }
        case "allreduce-against-broadcast": {
          // After the warm-up, the victim all-reduces 2 MiB (a shared-memory window) while the others broadcast
          // from rank 0 (a chain over TCP): the same collective number, different collectives.
          warmUp(pg);
          try (Tensor t = pg.zeros(1 << 18, DType.INT64); Tensor b = input(pg, 6)) {
            long issued = System.nanoTime();
            if (isVictim) {
              report(rank, "A", issued, () -> pg.allReduce(t, ReduceOp.SUM), t);
            } else {
              report(rank, "A", issued, () -> pg.broadcast(t, 0), t);
            }
            // The broadcast's root needs nobody to send: it may return before the mismatch is found; not the next.
            report(rank, "B", System.nanoTime(), () -> pg.allReduce(b, ReduceOp.SUM), b);
          }
          leave(j.store(), rank, allBut(env.worldSize(), -1), timeout);
          break;
        }
        case "allreduce-both-ways": {
          // Every rank all-reduces 2 MiB; the victim's environment (NCCL4J_CPU_ALGO=ring) makes it use the ring over
          // TCP where its host-mates open a shared-memory window.
          warmUp(pg);
          try (Tensor t = pg.zeros(1 << 18, DType.INT64)) {
            report(rank, "A", System.nanoTime(), () -> pg.allReduce(t, ReduceOp.SUM), t);
          }
          leave(j.store(), rank, allBut(env.worldSize(), -1), timeout);
          break;
        }
        case "two-die-then-shrink": {
          // Ranks victim and above wait to be killed; once both are dead (the test writes args[3]), the survivors'
          // next all-reduce fails, and each says what it knows and shrinks.
          warmUp(pg);
          if (rank >= victim) {
            say("rank " + rank + " ready");
            Thread.sleep(120_000);
            System.exit(0);
          }
          java.nio.file.Path killed = java.nio.file.Path.of(args[3]);
          while (!java.nio.file.Files.exists(killed)) {
            Thread.sleep(10);
          }
          try (Tensor t = input(pg, 7)) {
            report(rank, "A", System.nanoTime(), () -> pg.allReduce(t, ReduceOp.SUM), t);
          }
          say("rank " + rank + " failedRanks " + pg.failedRanks());
          try {
            pg.shrink(env.worldSize() - 1);
            say("rank " + rank + " shrink of the last rank only: made a group");
          } catch (IllegalStateException e) {
            say("rank " + rank + " shrink of the last rank only: refused: " + e.getMessage());
          }
          int[] failed = pg.failedRanks().stream().mapToInt(Integer::intValue).toArray();
          try (ProcessGroup small = pg.shrink(failed); Tensor t = input(small, 8)) {
            report(rank, "shrunk", System.nanoTime(), () -> small.allReduce(t, ReduceOp.SUM), t);
          }
          leave(j.store(), rank, allBut(victim, -1), timeout);
          break;
        }
        case "stop-in-window":
          // The victim's JVM has -Dnccl4j.fault.stopInWindow: it stops itself inside one of these windows.
          bigLoop(pg, rank);
          leave(j.store(), rank, survivors, timeout);
          break;
        case "busy-elsewhere": {
          warmUp(pg);
          if (isVictim) {
            // Its main thread (the one that ran its collectives) waits on a thread of its own that computes: the
            // peers that time out on it must call it busy, not asleep.
            Thread worker = new Thread(() -> {
              long end = System.nanoTime() + timeout.multipliedBy(3).toNanos();
              while (System.nanoTime() - end < 0) {
                Thread.onSpinWait();
              }
            }, "busy-worker");
            worker.start();
            say("rank " + rank + " busy");
            worker.join();
            Runtime.getRuntime().halt(0);
          }
          survive(pg, false);
          leave(j.store(), rank, survivors, timeout);
          break;
        }
        case "stop-staggered": {
          warmUp(pg);
          say("rank " + rank + " ready");
          java.nio.file.Path go = java.nio.file.Path.of(args[3]);
          Waits.await("the test's go file " + go, java.time.Duration.ofSeconds(60))
              .until(() -> java.nio.file.Files.exists(go));
          // The rank that reads from the victim starts at once, the next in the ring 600 ms later...
          int place = Math.floorMod(rank - victim - 1, env.worldSize());
          Thread.sleep(600L * place); // kept: the scenario, ranks that are deliberately late by turns
          survive(pg, false);
          leave(j.store(), rank, survivors, timeout);
          break;
        }
        case "abort":
          warmUp(pg);
          if (isVictim) {
            abortTwice(pg);
            // Alive, with its group aborted, until every survivor has reported.
            for (int r : survivors) {
              j.store().get("test/done/" + r, timeout.multipliedBy(3));
            }
            j.store().set("test/victim-left", new byte[] {1});
            say("rank " + rank + " done");
            System.exit(0);
          }
          survive(pg, false);
          j.store().set("test/done/" + rank, new byte[] {1});
          if (rank == 0) {
            j.store().get("test/victim-left", timeout.multipliedBy(3));
          }
          say("rank " + rank + " done");
          System.exit(0);
          break;
        case "recover":
          warmUp(pg);
          // Read while the group lives: once every rank has closed it, its last member deletes its keys.
          String oldGid = new String(j.store().get("transport/gid", timeout));
          if (isVictim) {
            abortTwice(pg);
          } else {
            survive(pg, false);
            pg.abort();
            pg.abort();
            say("rank " + rank + " aborted, closed=" + pg.isClosed());
          }
          ProcessGroups.Joined again = ProcessGroups.init(env, "cpu", timeout);
          ProcessGroup pg2 = again.group();
          String newGid = new String(again.store().get("transport/gid", timeout));
          say("rank " + rank + " new group: rank " + pg2.rank() + " of " + pg2.size() + ", open=" + !pg2.isClosed()
              + ", new transport id=" + !newGid.equals(oldGid));
          try (Tensor t = input(pg2, 4)) {
            report(rank, "round4", System.nanoTime(), () -> pg2.allReduce(t, ReduceOp.SUM), t);
          }
          pg2.close();
          leave(again.store(), rank, allBut(env.worldSize(), -1), timeout);
          break;
        default:
          throw new IllegalArgumentException("unknown scenario " + scenario);
      }
    }

    private static void abortTwice(ProcessGroup pg) {
      pg.abort();
      pg.abort();
      String after;
      try (Tensor t = Tensor.ofLongs(1, 2, 3)) {
        pg.allReduce(t, ReduceOp.SUM);
        after = "returned";
      } catch (RuntimeException e) {
        after = e.getClass().getName();
      }
      say("rank " + pg.rank() + " aborted twice, closed=" + pg.isClosed() + ", next collective: " + after);
    }

    /**
     * Every rank all-reduces 2 MiB in a loop (the direct algorithm: a window every rank waits to leave), checking
     * each result; a survivor reports the all-reduce that failed as op A and the one after as op C.
     */
    private static void bigLoop(ProcessGroup pg, int rank) {
      int n = 1 << 18;
      try (Tensor t = pg.empty(n, DType.INT64); Tensor out = pg.empty(n, DType.INT64)) {
        for (int it = 0; it < 100; it++) {
          for (int i = 0; i < n; i++) {
            t.setLong(i, 1_000_000L * it + 1000L * rank + i);
          }
          long issued = System.nanoTime();
          try {
            pg.allReduce(out, t, ReduceOp.SUM);
          } catch (RuntimeException e) {
            say("rank " + rank + " op A failed after " + (System.nanoTime() - issued) / 1_000_000 + " ms: "
                + oneLine(e));
            break;
          }
          int size = pg.size();
          for (int i = 0; i < n; i++) {
            long want = size * (1_000_000L * it + i) + 1000L * size * (size - 1) / 2;
            if (out.getLong(i) != want) {
              say("rank " + rank + " iteration " + it + " wrong at " + i + ": " + out.getLong(i) + " != " + want);
              break;
            }
          }
        }
        long later = System.nanoTime();
        report(rank, "C", later, () -> pg.allReduce(out, t, ReduceOp.SUM), out);
      }
    }

    /**
     * Every rank all-reduces in a loop, checking each result; the victim announces itself after
     * its first iteration and is then stopped by the test. Survivors report the iteration that
     * failed as op A and a later one as op C.
     */
    private static void stopLoop(ProcessGroup pg, int rank) {
      try (Tensor t = pg.empty(COUNT, DType.INT64)) {
        int wrong = 0;
        int ok = 0;
        for (int it = 0; it < 100_000; it++) {
          long[] v = new long[COUNT];
          for (int i = 0; i < COUNT; i++) {
            v[i] = value(20, rank, i) + it;
          }
          try (Tensor host = Tensor.fromArray(v, DType.INT64, pg.allocator())) {
            t.copyFrom(host);
          }
          long issued = System.nanoTime();
          try {
            pg.allReduce(t, ReduceOp.SUM);
          } catch (RuntimeException e) {
            say("rank " + rank + " iterations ok " + ok + " wrong " + wrong);
            say("rank " + rank + " op A failed after " + (System.nanoTime() - issued) / 1_000_000 + " ms: "
                + oneLine(e));
            break;
          }
          long[] e = expectedSum(20, pg.size());
          for (int i = 0; i < COUNT; i++) {
            e[i] += (long) it * pg.size();
          }
          if (Arrays.equals(e, t.toLongArray())) {
            ok++;
          } else {
            wrong++;
          }
          if (it == 0) {
            say("rank " + rank + " looping");
          }
          try {
            Thread.sleep(5); // kept: the pace of a loop of collectives that a stop interrupts
          } catch (InterruptedException ie) {
            Thread.currentThread().interrupt();
          }
        }
        long later = System.nanoTime();
        report(rank, "C", later, () -> pg.allReduce(t, ReduceOp.SUM), t);
      }
    }
  }
}
