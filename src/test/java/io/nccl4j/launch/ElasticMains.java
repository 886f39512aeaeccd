package io.nccl4j.launch;

import io.nccl4j.DType;
import io.nccl4j.PeerFailureException;
import io.nccl4j.ProcessGroup;
import io.nccl4j.ReduceOp;
import io.nccl4j.Tensor;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Optional;

/**
 * Rank programs for {@link ElasticLauncherTest}, run under the launcher: a job whose rank 0 dies and whose survivors
 * shrink and go on, and a job whose failed rank is not the first to exit. Every value a rank checks is distinct for
 * its world rank and element.
 */
final class ElasticMains {
  private ElasticMains() {}

  /** Element {@code i} of world rank {@code r}: distinct for every (rank, element), exact in int64 sums. */
  static long value(int worldRank, long i) {
    return (worldRank + 1) * 1_000_003L + i * 7;
  }

  static Tensor data(ProcessGroup g, int worldRank, long count) {
    Tensor t = g.empty(count, DType.INT64);
    for (long i = 0; i < count; i++) {
      t.setLong(i, value(worldRank, i));
    }
    return t;
  }

  /**
   * {@code args}: group timeout in ms, element count, collectives after the shrink. Every rank all-reduces once
   * (checked); then rank 0 sends itself SIGKILL, and every survivor's second all-reduce fails naming it. Each
   * survivor shrinks the group to the others — a rendezvous in the job's store, which rank 0 no longer hosts — and
   * runs all-reduce, all-gather, broadcast and reduce-scatter in turn, checking every element against the world
   * ranks' data, then prints {@code survivor r: rank k of n, C collectives, W wrong, failed rank F} and exits 0
   * (1 when an element was wrong).
   */
  public static final class ShrinkAfterRankZeroDies {
    public static void main(String[] args) throws Exception {
      Duration timeout = Duration.ofMillis(Long.parseLong(args[0]));
      int count = Integer.parseInt(args[1]);
      int steps = Integer.parseInt(args[2]);
      ProcessGroup world = ProcessGroups.init("cpu", timeout).group();
      int me = world.rank();
      int p = world.size();
      try (Tensor t = data(world, me, count)) {
        world.allReduce(t, ReduceOp.SUM);
        long wrong = 0;
        for (long i = 0; i < count; i++) {
          long want = 0;
          for (int r = 0; r < p; r++) {
            want += value(r, i);
          }
          wrong += t.getLong(i) != want ? 1 : 0;
        }
        System.out.println("rank " + me + " first all-reduce: " + wrong + " wrong");
      }
      if (me == 0) {
        System.out.println("rank 0 pid " + ProcessHandle.current().pid() + " sends itself SIGKILL");
        System.out.flush();
        RankMains.killMyself();
      }
      int failed;
      try (Tensor t = data(world, me, count)) {
        world.allReduce(t, ReduceOp.SUM);
        System.out.println("rank " + me + ": the second all-reduce returned without rank 0");
        System.exit(1);
        return;
      } catch (PeerFailureException e) {
        failed = e.failedRank();
        System.out.println("rank " + me + " caught " + e.getClass().getSimpleName() + " failedRank=" + failed);
      }
      long wrong = 0;
      try (ProcessGroup survivors = world.shrink(failed)) {
        for (int k = 0; k < steps; k++) {
          wrong += exactStep(survivors, count, k);
        }
        System.out.println("survivor " + me + ": rank " + survivors.rank() + " of " + survivors.size() + ", " + steps
            + " collectives, " + wrong + " wrong, failed rank " + failed);
      }
      System.out.flush();
      // The dead rank's group is not closed: its peers are gone, and the process ends here.
      System.exit(wrong == 0 ? 0 : 1);
    }

    /** One collective on the survivors' group; its wrong elements, counted against the world ranks' data. */
    private static long exactStep(ProcessGroup g, int count, int k) {
      int n = g.size();
      int[] world = g.ranks();
      long wrong = 0;
      switch (k % 4) {
        case 0 -> {
          try (Tensor t = data(g, world[g.rank()], count)) {
            g.allReduce(t, ReduceOp.SUM);
            for (long i = 0; i < count; i++) {
              long want = 0;
              for (int w : world) {
                want += value(w, i);
              }
              wrong += t.getLong(i) != want ? 1 : 0;
            }
          }
        }
        case 1 -> {
          try (Tensor in = data(g, world[g.rank()], count); Tensor out = g.empty((long) count * n, DType.INT64)) {
            g.allGatherIntoTensor(out, in);
            for (int r = 0; r < n; r++) {
              for (long i = 0; i < count; i++) {
                wrong += out.getLong((long) r * count + i) != value(world[r], i) ? 1 : 0;
              }
            }
          }
        }
        case 2 -> {
          int root = n - 1;
          try (Tensor t = data(g, world[g.rank()], count)) {
            g.broadcast(t, root);
            for (long i = 0; i < count; i++) {
              wrong += t.getLong(i) != value(world[root], i) ? 1 : 0;
            }
          }
        }
        default -> {
          try (Tensor in = data(g, world[g.rank()], (long) count * n); Tensor out = g.empty(count, DType.INT64)) {
            g.reduceScatterTensor(out, in, ReduceOp.SUM);
            for (long i = 0; i < count; i++) {
              long want = 0;
              for (int w : world) {
                want += value(w, (long) g.rank() * count + i);
              }
              wrong += out.getLong(i) != want ? 1 : 0;
            }
          }
        }
      }
      return wrong;
    }
  }

  /**
   * {@code args}: group timeout in ms, the directory where rank 0 leaves its pid, the victim's message. Every rank
   * all-reduces once; rank 0 writes its pid. Then rank 2 — the victim — fails: its main thread dies of an
   * IllegalStateException with the message while the others wait for it in a second all-reduce, and its JVM stays
   * until rank 0's process has ended (a non-daemon thread, as an application's pending work would keep it), so that
   * it exits after the ranks that only reported it. Ranks 0 and 1 wrap what they caught in an exception of their
   * own ({@code RuntimeException: step 2 failed}), as applications do, whose line names no rank.
   */
  public static final class FailsFirstExitsLast {
    public static void main(String[] args) throws Exception {
      Duration timeout = Duration.ofMillis(Long.parseLong(args[0]));
      Path dir = Path.of(args[1]);
      String message = args[2];
      ProcessGroup pg = ProcessGroups.init("cpu", timeout).group();
      int rank = pg.rank();
      try (Tensor warm = data(pg, rank, 4); Tensor t = data(pg, rank, 1 << 10)) {
        pg.allReduce(warm, ReduceOp.SUM);
        if (rank == 0) {
          Files.writeString(dir.resolve("rank0.pid"), Long.toString(ProcessHandle.current().pid()));
        }
        if (rank == 2) {
          Thread stay = new Thread(() -> awaitRankZerosEnd(dir, timeout.multipliedBy(2)), "pending-work");
          stay.start();
          System.out.println("rank 2 throws");
          System.out.flush();
          throw new IllegalStateException(message);
        }
        try {
          pg.allReduce(t, ReduceOp.SUM);
          System.out.println("rank " + rank + " returned");
        } catch (RuntimeException e) {
          System.out.println("rank " + rank + " caught " + e.getClass().getSimpleName() + " failedRank="
              + (e instanceof PeerFailureException f ? f.failedRank() : -1));
          System.out.flush();
          throw new RuntimeException("step 2 failed", e);
        }
      }
    }

    private static void awaitRankZerosEnd(Path dir, Duration atMost) {
      long until = System.nanoTime() + atMost.toNanos();
      try {
        while (System.nanoTime() - until < 0) {
          Path f = dir.resolve("rank0.pid");
          if (Files.exists(f)) {
            Optional<ProcessHandle> h = ProcessHandle.of(Long.parseLong(Files.readString(f).trim()));
            if (h.isEmpty() || !h.get().isAlive() || RankMains.isZombie(h.get().pid())) {
              return;
            }
          }
          Thread.sleep(20);
        }
      } catch (Exception e) {
        // the rank ends either way
      }
    }
  }
}
