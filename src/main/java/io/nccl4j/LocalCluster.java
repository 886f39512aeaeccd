package io.nccl4j;

import io.nccl4j.cpu.CpuCluster;
import io.nccl4j.memory.Allocator;
import io.nccl4j.spi.Backend;
import io.nccl4j.spi.ClusterBackend;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.atomic.AtomicLong;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Runs ranks as threads of this JVM, each with its own {@link ProcessGroup} — on the CPU backend by
 * default, or on NCCL with one GPU per rank ({@link #backend}) — the analogue of
 * {@code torch.multiprocessing.spawn}.
 *
 * <pre>{@code
 * LocalCluster.run(4, pg -> {
 *   try (Tensor t = Tensor.arange(0, 16, DType.FLOAT32, pg.allocator())) {
 *     pg.allReduce(t);
 *   }
 * });
 * }</pre>
 *
 * <p>Each rank gets its own allocator (a child of its device's allocator named {@code rankN}), so
 * its memory statistics are its own. When a rank's task throws, every other rank's backend is
 * aborted at once: their pending and later operations fail with a {@link PeerFailureException}
 * naming that rank and its error, instead of waiting. The run then throws
 * {@link RankFailedException}.
 */
public final class LocalCluster {
  private static final Logger LOG = LoggerFactory.getLogger(LocalCluster.class);
  private static final AtomicLong RUNS = new AtomicLong();

  /** Default operation timeout, as PyTorch's (10 minutes). */
  public static final Duration DEFAULT_TIMEOUT = Duration.ofMinutes(10);

  /** A rank's work. */
  @FunctionalInterface
  public interface RankTask {
    void run(ProcessGroup group) throws Exception;
  }

  /** A rank's work with a result. */
  @FunctionalInterface
  public interface RankCall<T> {
    T call(ProcessGroup group) throws Exception;
  }

  private final int worldSize;
  private ClusterBackend backend = CpuCluster.INSTANCE;
  private Duration timeout = DEFAULT_TIMEOUT;
  private boolean strictMemory;

  private LocalCluster(int worldSize) {
    if (worldSize < 1) {
      throw new IllegalArgumentException("world size must be >= 1, got " + worldSize);
    }
    this.worldSize = worldSize;
  }

  /** A cluster of {@code worldSize} ranks, to configure before {@link #call}. */
  public static LocalCluster of(int worldSize) {
    return new LocalCluster(worldSize);
  }

  /** Runs {@code task} on {@code worldSize} ranks with default options and waits for all. */
  public static void run(int worldSize, RankTask task) {
    of(worldSize).run(task);
  }

  /** Runs {@code task} on {@code worldSize} ranks and returns each rank's result, by rank. */
  public static <T> List<T> call(int worldSize, RankCall<T> task) {
    return of(worldSize).call(task);
  }

  /** Operation timeout of every group (default 10 minutes). */
  public LocalCluster timeout(Duration t) {
    if (t.isNegative() || t.isZero()) {
      throw new IllegalArgumentException("timeout must be positive, got " + t);
    }
    this.timeout = t;
    return this;
  }

  /** The backend of every rank (default: the CPU backend). */
  public LocalCluster backend(ClusterBackend b) {
    this.backend = Objects.requireNonNull(b, "backend");
    return this;
  }

  /**
   * When true, a rank whose task returns with tensors still allocated fails the run, listing them;
   * when false (default) it is logged.
   */
  public LocalCluster strictMemory(boolean strict) {
    this.strictMemory = strict;
    return this;
  }

  public int worldSize() {
    return worldSize;
  }

  public void run(RankTask task) {
    Objects.requireNonNull(task, "task");
    call(pg -> {
      task.run(pg);
      return null;
    });
  }

  public <T> List<T> call(RankCall<T> task) {
    Objects.requireNonNull(task, "task");
    long id = RUNS.incrementAndGet();
    ClusterBackend.Run run = backend.start(worldSize, timeout, "run" + id);
    Backend[] backends = new Backend[worldSize];
    Object[] results = new Object[worldSize];
    Throwable[] errors = new Throwable[worldSize];
    long[] failedAt = new long[worldSize];
    Thread[] threads = new Thread[worldSize];
    for (int r = 0; r < worldSize; r++) {
      final int rank = r;
      threads[r] = new Thread(() -> {
        ProcessGroup pg = null;
        try {
          Backend b = run.create(rank);
          synchronized (backends) {
            backends[rank] = b;
          }
          pg = ProcessGroup.create(b);
          results[rank] = task.call(pg);
          pg.close();
          closeAllocator(b.allocator(), rank);
        } catch (Throwable e) {
          failedAt[rank] = System.nanoTime();
          errors[rank] = e;
          abortOthers(backends, rank, e);
          if (pg != null) {
            pg.close();
          }
        }
      }, "nccl4j-rank" + r);
      threads[r].start();
    }
    for (Thread t : threads) {
      joinUninterruptibly(t);
    }
    int first = -1;
    for (int r = 0; r < worldSize; r++) {
      if (errors[r] != null && (first < 0 || rootCauseFirst(errors, failedAt, r, first))) {
        first = r;
      }
    }
    if (first >= 0) {
      RankFailedException e = new RankFailedException(first, errors[first]);
      for (int r = 0; r < worldSize; r++) {
        if (r != first && errors[r] != null) {
          e.addSuppressed(errors[r]);
        }
      }
      throw e;
    }
    @SuppressWarnings("unchecked")
    List<T> out = (List<T>) new ArrayList<>(Arrays.asList(results));
    return out;
  }

  /** Fails every other rank's operations with an error naming {@code rank} (first failure wins). */
  private static void abortOthers(Backend[] backends, int rank, Throwable e) {
    PeerFailureException cause = e instanceof PeerFailureException ? (PeerFailureException) e
        : new PeerFailureException(rank, "rank " + rank + " failed: " + describe(e), e);
    synchronized (backends) {
      for (Backend b : backends) {
        if (b != null) {
          b.abort(cause);
        }
      }
    }
  }

  private static String describe(Throwable t) {
    String m = t.getMessage();
    return m == null ? t.getClass().getName() : t.getClass().getSimpleName() + ": " + m;
  }

  /** A rank's own error beats a peer-failure report; among equals, the earlier one wins. */
  private static boolean rootCauseFirst(Throwable[] errors, long[] at, int r, int current) {
    boolean rPeer = errors[r] instanceof PeerFailureException;
    boolean cPeer = errors[current] instanceof PeerFailureException;
    if (rPeer != cPeer) {
      return !rPeer;
    }
    return at[r] - at[current] < 0;
  }

  private void closeAllocator(Allocator alloc, int rank) {
    try {
      alloc.close();
    } catch (IllegalStateException leak) {
      if (strictMemory) {
        throw new IllegalStateException("rank " + rank + " returned without closing its tensors", leak);
      }
      LOG.warn("rank {} returned without closing its tensors: {}", rank, leak.getMessage());
    }
  }

  private static void joinUninterruptibly(Thread t) {
    boolean interrupted = false;
    while (true) {
      try {
        t.join();
        break;
      } catch (InterruptedException e) {
        interrupted = true;
      }
    }
    if (interrupted) {
      Thread.currentThread().interrupt();
    }
  }
}
