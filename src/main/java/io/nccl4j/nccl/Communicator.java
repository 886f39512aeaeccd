package io.nccl4j.nccl;

import io.nccl4j.Device;
import io.nccl4j.nccl.bind.NcclApi;
import java.time.Duration;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Owner of one NCCL communicator ({@code ncclComm_t}) for one rank on one device.
 *
 * <p>{@link #close()} destroys it (collective within a node: every local rank should close) or,
 * once it is broken, aborts it; {@link #abort()} is local and may be called from any thread. Both
 * are idempotent, and using the communicator afterwards throws {@link IllegalStateException}.
 * Because {@code ncclCommAbort} can itself hang in some NCCL versions, {@link #abort(Duration)}
 * runs it on a helper thread and gives up waiting after a deadline.
 */
public final class Communicator implements AutoCloseable {
  private static final Logger LOG = LoggerFactory.getLogger(Communicator.class);

  private final Nccl nccl;
  private final int rank;
  private final int size;
  private final int device;
  private volatile long handle;
  private volatile boolean broken;

  private Communicator(Nccl nccl, int rank, int size, int device, long handle) {
    this.nccl = nccl;
    this.rank = rank;
    this.size = size;
    this.device = device;
    this.handle = handle;
  }

  /**
   * {@code ncclCommInitRank} on {@code device}: collective — every rank of the communicator calls it
   * with the same {@code uniqueId}, concurrently (from its own process or thread).
   */
  public static Communicator initRank(Nccl nccl, int device, int size, int rank, byte[] uniqueId) {
    if (uniqueId == null || uniqueId.length != 128) {
      throw new IllegalArgumentException("NCCL unique id must be 128 bytes, got "
          + (uniqueId == null ? "null" : uniqueId.length));
    }
    nccl.setDevice(device);
    long[] out = new long[1];
    NcclApi api = nccl.api();
    NcclCall.Context ctx = new NcclCall.Context(rank, size, Device.cuda(device), nccl.version(), 0);
    NcclCall.check(api.commInitRank(out, size, uniqueId, rank), api, ctx, "ncclCommInitRank");
    return new Communicator(nccl, rank, size, device, out[0]);
  }

  /**
   * Like {@link #initRank}, but non-blocking where NCCL supports it (≥ 2.14, ncclConfig blocking = 0):
   * the call returns at once and nccl4j polls {@code ncclCommGetAsyncError} until the communicator
   * is ready — so that a rank that never joins makes the others fail after {@code timeout} (the
   * communicator is aborted) instead of blocking forever. Older NCCL: a blocking init.
   *
   * @throws io.nccl4j.CollectiveTimeoutException when the init does not complete in time
   */
  public static Communicator initRankNonBlocking(Nccl nccl, int device, int size, int rank, byte[] uniqueId,
      Duration timeout) {
    if (!nccl.version().atLeast(NcclVersion.V2_14)) {
      return initRank(nccl, device, size, rank, uniqueId);
    }
    if (uniqueId == null || uniqueId.length != 128) {
      throw new IllegalArgumentException("NCCL unique id must be 128 bytes, got "
          + (uniqueId == null ? "null" : uniqueId.length));
    }
    nccl.setDevice(device);
    long[] out = new long[1];
    NcclApi api = nccl.api();
    NcclCall.Context ctx = new NcclCall.Context(rank, size, Device.cuda(device), nccl.version(), 0);
    NcclCall.check(api.commInitRankConfig(out, size, uniqueId, rank, false), api, ctx, "ncclCommInitRankConfig");
    Communicator c = new Communicator(nccl, rank, size, device, out[0]);
    c.nonBlocking = true;
    try {
      c.awaitReady(timeout, "ncclCommInitRankConfig");
    } catch (RuntimeException e) {
      c.abort(Duration.ofSeconds(30));
      throw e;
    }
    return c;
  }

  private volatile boolean nonBlocking;

  /** True when created non-blocking: NCCL calls may return ncclInProgress and are then polled. */
  public boolean isNonBlocking() {
    return nonBlocking;
  }

  /**
   * Polls {@code ncclCommGetAsyncError} until it is no longer ncclInProgress (a non-blocking
   * communicator finishing an init or an enqueue); throws its error, or a timeout.
   */
  public void awaitReady(Duration timeout, String what) {
    long deadline = System.nanoTime() + timeout.toNanos();
    int[] out = new int[1];
    NcclApi api = nccl.api();
    long pause = 1000;
    while (true) {
      int rc = api.commGetAsyncError(handle(), out);
      NcclCall.check(rc, api, context(), "ncclCommGetAsyncError");
      if (out[0] == 0) {
        return;
      }
      if (out[0] != NcclResult.IN_PROGRESS.code()) {
        markBroken();
        throw NcclCall.error(out[0], api, context(), what);
      }
      if (System.nanoTime() - deadline > 0) {
        markBroken();
        throw new io.nccl4j.CollectiveTimeoutException(what + " on rank " + rank + " of " + size + " (cuda:" + device
            + ") did not complete within " + timeout.toMillis() + " ms; the communicator is aborted");
      }
      java.util.concurrent.locks.LockSupport.parkNanos(pause);
      pause = Math.min(1_000_000, pause * 2);
    }
  }

  public int rank() {
    return rank;
  }

  public int size() {
    return size;
  }

  public int deviceIndex() {
    return device;
  }

  public Device device() {
    return Device.cuda(device);
  }

  public Nccl nccl() {
    return nccl;
  }

  /** The ncclComm_t. */
  public long handle() {
    long h = handle;
    if (h == 0) {
      throw new IllegalStateException("NCCL communicator of rank " + rank + " on cuda:" + device + " is closed");
    }
    return h;
  }

  /** Context for error messages. */
  public NcclCall.Context context() {
    return new NcclCall.Context(rank, size, Device.cuda(device), nccl.version(), handle);
  }

  /**
   * {@code ncclCommGetAsyncError}: 0 while healthy, ncclInProgress while a non-blocking operation
   * runs, otherwise the error that broke the communicator.
   */
  public int asyncError() {
    nccl.version().require(NcclVersion.V2_4, "ncclCommGetAsyncError");
    int[] out = new int[1];
    NcclApi api = nccl.api();
    NcclCall.check(api.commGetAsyncError(handle(), out), api, context(), "ncclCommGetAsyncError");
    return out[0];
  }

  /** Marks the communicator broken: {@link #close()} will abort it instead of destroying it. */
  public void markBroken() {
    broken = true;
  }

  public boolean isBroken() {
    return broken;
  }

  public boolean isClosed() {
    return handle == 0;
  }

  /** {@code ncclCommAbort}, waiting for it at most 30 seconds. Local; idempotent. */
  public void abort() {
    abort(Duration.ofSeconds(30));
  }

  /**
   * {@code ncclCommAbort} on a helper thread; returns true if it finished within {@code deadline}.
   * Local (no other rank needs to call it); idempotent. Afterwards the communicator is closed.
   */
  public boolean abort(Duration deadline) {
    long h = take();
    if (h == 0) {
      return true;
    }
    nccl.version().require(NcclVersion.V2_4, "ncclCommAbort");
    CountDownLatch done = new CountDownLatch(1);
    int[] rc = {0};
    Thread t = new Thread(() -> {
      try {
        nccl.setDevice(device);
        rc[0] = nccl.api().commAbort(h);
      } finally {
        done.countDown();
      }
    }, "nccl4j-abort-rank" + rank);
    t.setDaemon(true);
    t.start();
    try {
      if (!done.await(deadline.toMillis(), TimeUnit.MILLISECONDS)) {
        LOG.warn("rank {}: ncclCommAbort did not return within {} ms; leaving it running in the background",
            rank, deadline.toMillis());
        return false;
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return false;
    }
    if (rc[0] != 0) {
      LOG.warn("rank {}: ncclCommAbort returned {}", rank, rc[0]);
    }
    return true;
  }

  private long take() {
    synchronized (this) {
      long h = handle;
      handle = 0;
      return h;
    }
  }

  /** Destroys the communicator, or aborts it when broken. Idempotent. */
  @Override
  public void close() {
    if (broken) {
      abort();
      return;
    }
    long h = take();
    if (h != 0) {
      nccl.setDevice(device);
      NcclApi api = nccl.api();
      NcclCall.check(api.commDestroy(h), api, context(), "ncclCommDestroy");
    }
  }

  @Override
  public String toString() {
    return "Communicator(rank " + rank + " of " + size + ", cuda:" + device + (handle == 0 ? ", closed" : "")
        + (broken ? ", broken" : "") + ")";
  }
}
