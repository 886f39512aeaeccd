package io.nccl4j;

import io.nccl4j.cpu.CpuCluster;
import io.nccl4j.memory.Allocator;
import io.nccl4j.memory.LeakReport;
import io.nccl4j.spi.Backend;
import io.nccl4j.spi.ClusterBackend;
import io.nccl4j.store.HashStore;
import io.nccl4j.store.Store;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.atomic.AtomicLong;

// Over 400 lines because LocalCluster and its Session are one mechanism — rank threads that
// create their groups, run tasks, close and check memory — documented for users; which failure
// a job reports is RankFailures'.

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
 * <p>{@link #run}/{@link #call} create the groups, run one task on every rank and close the groups.
 * {@link #open()} keeps the groups alive across several tasks (a {@link Session}), which matters
 * when creating a group is expensive (an NCCL communicator).
 *
 * <p>Each rank gets its own allocator (a child of its device's allocator named {@code rankN}), so
 * its memory statistics are its own. When a rank's task throws, every other rank's backend is
 * aborted at once: their pending and later operations fail with a {@link PeerFailureException}
 * naming that rank and its error, instead of waiting. The call then throws
 * {@link RankFailedException}.
 */
public final class LocalCluster {
  private static final AtomicLong RUNS = new AtomicLong();

  /** Default operation timeout, as PyTorch's (10 minutes). */
  public static final Duration DEFAULT_TIMEOUT = Duration.ofMinutes(10);

  /** A rank's work. */
  @FunctionalInterface
  public interface RankTask {
    /**
     * Runs on the rank's own thread with that rank's group, which the cluster created and closes.
     * Throwing fails the run: every other rank's backend is aborted, and the caller gets a
     * {@link RankFailedException}.
     */
    void run(ProcessGroup group) throws Exception;
  }

  /** A rank's work with a result. */
  @FunctionalInterface
  public interface RankCall<T> {
    /** As {@link RankTask#run}; the value returned is this rank's entry in the list of results. */
    T call(ProcessGroup group) throws Exception;
  }

  private final int worldSize;
  private ClusterBackend backend = CpuCluster.INSTANCE;
  private Duration timeout = DEFAULT_TIMEOUT;
  private boolean strictMemory;
  private Validation validation = Validation.fromEnvironment();

  private LocalCluster(int worldSize) {
    if (worldSize < 1) {
      throw new IllegalArgumentException("world size must be >= 1, got " + worldSize);
    }
    this.worldSize = worldSize;
  }

  /** A cluster of {@code worldSize} ranks, to configure before {@link #call} or {@link #open}. */
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

  /** The backend of every rank (default: the CPU backend). */
  public LocalCluster backend(ClusterBackend b) {
    this.backend = Objects.requireNonNull(b, "backend");
    return this;
  }

  /** Operation timeout of every group (default 10 minutes). */
  public LocalCluster timeout(Duration t) {
    if (t.isNegative() || t.isZero()) {
      throw new IllegalArgumentException("timeout must be positive, got " + t);
    }
    this.timeout = t;
    return this;
  }

  /** Cross-rank validation of every group (default: {@code NCCL4J_DEBUG}); see {@link Validation}. */
  public LocalCluster validation(Validation mode) {
    this.validation = Objects.requireNonNull(mode, "mode");
    return this;
  }

  /**
   * When true, a rank that ends with tensors still allocated fails the run, listing them; when
   * false (default) it is logged.
   */
  public LocalCluster strictMemory(boolean strict) {
    this.strictMemory = strict;
    return this;
  }

  /** The number of ranks, one thread each. */
  public int worldSize() {
    return worldSize;
  }

  /**
   * Creates the groups, runs {@code task} on every rank, closes the groups, and waits for all.
   *
   * @throws RankFailedException if a rank's task threw, or a group or (with {@link #strictMemory})
   *     a rank's memory check failed when closing
   */
  public void run(RankTask task) {
    Objects.requireNonNull(task, "task");
    call(pg -> {
      task.run(pg);
      return null;
    });
  }

  /** Creates the groups, runs {@code task} on every rank, closes the groups; results by rank. */
  public <T> List<T> call(RankCall<T> task) {
    Objects.requireNonNull(task, "task");
    // One task: each rank closes its group as soon as its task returns, so that peers still waiting
    // for it fail at once instead of timing out.
    Session s = open(true);
    List<T> out;
    try {
      out = s.call(task);
    } catch (RuntimeException e) {
      try {
        s.close();
      } catch (RuntimeException closeError) {
        e.addSuppressed(closeError);
      }
      throw e;
    }
    s.close();
    return out;
  }

  /**
   * Starts one thread per rank and creates every rank's group; returns once all exist.
   *
   * @throws RankFailedException if a rank could not create its group (the others are stopped)
   */
  public Session open() {
    return open(false);
  }

  private Session open(boolean oneTask) {
    Session s = new Session(backend.start(worldSize, timeout, "run" + RUNS.incrementAndGet()), oneTask);
    s.awaitStarted();
    return s;
  }

  private static final Object STOP = new Object();

  /** One unit of work for every rank. */
  private static final class Job {
    final RankCall<?> task;
    final Object[] results;
    final Throwable[] errors;
    final long[] failedAt;
    final CountDownLatch done;

    Job(RankCall<?> task, int p) {
      this.task = task;
      this.results = new Object[p];
      this.errors = new Throwable[p];
      this.failedAt = new long[p];
      this.done = new CountDownLatch(p);
    }
  }

  /**
   * Groups kept alive across tasks: each {@link #call} runs one task on every rank's thread. After
   * a task fails the session is broken (the groups were aborted) and refuses further tasks.
   * {@link #close()} closes every group and checks each rank's memory. Not for concurrent calls.
   */
  public final class Session implements AutoCloseable {
    private final Backend[] backends = new Backend[worldSize];
    private final Thread[] threads = new Thread[worldSize];
    private final List<LinkedBlockingQueue<Object>> queues = new ArrayList<>();
    private final Job startup = new Job(null, worldSize);
    private final Throwable[] closeErrors = new Throwable[worldSize];
    private final boolean oneTask;
    private final Store store = new HashStore(timeout);
    private volatile RuntimeException brokenBy;
    private boolean closed;

    private Session(ClusterBackend.Run run, boolean oneTask) {
      this.oneTask = oneTask;
      for (int r = 0; r < worldSize; r++) {
        queues.add(new LinkedBlockingQueue<>());
      }
      for (int r = 0; r < worldSize; r++) {
        final int rank = r;
        threads[r] = new Thread(() -> rankLoop(run, rank), "nccl4j-rank" + r);
        threads[r].start();
      }
    }

    /** The number of ranks, as {@link LocalCluster#worldSize()}. */
    public int worldSize() {
      return worldSize;
    }

    private void rankLoop(ClusterBackend.Run run, int rank) {
      ProcessGroup pg;
      try {
        Backend b = run.create(rank);
        synchronized (backends) {
          backends[rank] = b;
        }
        pg = ProcessGroup.create(b);
        pg.setValidation(validation, store);
      } catch (Throwable e) {
        fail(startup, rank, e);
        startup.done.countDown();
        return;
      }
      startup.done.countDown();
      try {
        while (true) {
          Object next = queues.get(rank).take();
          if (next == STOP) {
            break;
          }
          Job job = (Job) next;
          try {
            job.results[rank] = job.task.call(pg);
          } catch (Throwable e) {
            fail(job, rank, e);
          } finally {
            if (oneTask) {
              closeGroup(pg, rank);
            }
            job.done.countDown();
          }
          if (oneTask) {
            return;
          }
        }
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      } finally {
        closeGroup(pg, rank);
      }
    }

    /** Idempotent: closes the rank's group, then checks its memory. */
    private void closeGroup(ProcessGroup pg, int rank) {
      if (pg.isClosed()) {
        return;
      }
      try {
        pg.close();
        closeAllocator(backends[rank].allocator(), rank);
      } catch (Throwable e) {
        closeErrors[rank] = e;
      }
    }

    private void fail(Job job, int rank, Throwable e) {
      job.failedAt[rank] = System.nanoTime();
      job.errors[rank] = e;
      abortOthers(backends, rank, e);
    }

    private void awaitStarted() {
      awaitUninterruptibly(startup.done);
      RankFailedException e = RankFailures.first(startup.errors, startup.failedAt);
      if (e != null) {
        brokenBy = e;
        close();
        throw e;
      }
    }

    /** Runs {@code task} on every rank and returns the results by rank. */
    public <T> List<T> call(RankCall<T> task) {
      Objects.requireNonNull(task, "task");
      if (closed) {
        throw new IllegalStateException("LocalCluster session is closed");
      }
      if (brokenBy != null) {
        throw new IllegalStateException("LocalCluster session is broken by an earlier failure: "
            + brokenBy.getMessage(), brokenBy);
      }
      Job job = new Job(task, worldSize);
      queues.forEach(q -> q.add(job));
      awaitUninterruptibly(job.done);
      RankFailedException e = RankFailures.first(job.errors, job.failedAt);
      if (e == null && oneTask) {
        e = firstCloseFailure();
      }
      if (e != null) {
        brokenBy = e;
        throw e;
      }
      @SuppressWarnings("unchecked")
      List<T> out = (List<T>) new ArrayList<>(Arrays.asList(job.results));
      return out;
    }

    private RankFailedException firstCloseFailure() {
      for (int r = 0; r < worldSize; r++) {
        if (closeErrors[r] != null) {
          return new RankFailedException(r, closeErrors[r]);
        }
      }
      return null;
    }

    /** Closes every rank's group and waits for the rank threads. Idempotent. */
    @Override
    public void close() {
      if (closed) {
        return;
      }
      closed = true;
      queues.forEach(q -> q.add(STOP));
      for (Thread t : threads) {
        joinUninterruptibly(t);
      }
      for (int r = 0; r < worldSize; r++) {
        if (closeErrors[r] != null && brokenBy == null) {
          Throwable err = closeErrors[r];
          throw err instanceof RuntimeException ? (RuntimeException) err : new IllegalStateException(err);
        }
      }
    }
  }

  /** Fails every other rank's operations with an error naming {@code rank} (first failure wins). */
  private static void abortOthers(Backend[] backends, int rank, Throwable e) {
    BackendException cause = RankFailures.causeForPeers(rank, e);
    synchronized (backends) {
      for (Backend b : backends) {
        if (b != null) {
          b.abort(cause);
        }
      }
    }
  }

  private void closeAllocator(Allocator alloc, int rank) {
    try {
      alloc.close();
    } catch (IllegalStateException leak) {
      if (strictMemory) {
        throw new IllegalStateException("rank " + rank + " returned without closing its tensors", leak);
      }
      // Told as the collector's leak reports are: on System.err when no SLF4J provider is bound.
      LeakReport.report("rank " + rank + " returned without closing its tensors: "
          + leak.getMessage());
    }
    // Tensor.empty(n, dtype) and the other host factories allocate from the process-wide host
    // allocator, which is never closed; what this rank's thread left there is its leak too.
    List<String> host = Allocator.host().liveBlocksAllocatedBy(Thread.currentThread());
    if (!host.isEmpty()) {
      String leak = "rank " + rank + " returned without closing " + host.size() + " host tensor(s) of the"
          + " process-wide host allocator:\n  " + String.join("\n  ", host)
          + (LeakReport.tracing() ? "" : "\n" + Allocator.TRACE_HINT);
      if (strictMemory) {
        throw new IllegalStateException(leak);
      }
      LeakReport.report(leak);
    }
  }

  private static void awaitUninterruptibly(CountDownLatch latch) {
    boolean interrupted = false;
    while (true) {
      try {
        latch.await();
        break;
      } catch (InterruptedException e) {
        interrupted = true;
      }
    }
    if (interrupted) {
      Thread.currentThread().interrupt();
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
