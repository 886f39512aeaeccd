package io.nccl4j.trace;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import io.nccl4j.CollectiveStats;
import io.nccl4j.internal.concurrent.PaddedCounter;
import io.nccl4j.internal.concurrent.PaddedLock;
import io.nccl4j.spi.Collective;
import java.io.IOException;
import java.nio.file.AtomicMoveNotSupportedException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.time.Instant;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The recent operations of one group on one rank, in a ring buffer (PyTorch's flight recorder):
 * sequence number, operation, element counts, dtype, reduce op, root or peer, split sizes, state
 * (scheduled, started, completed, failed) and the enqueue, start and end times. Dumped as JSON per
 * rank — automatically on a timeout, abort or mismatch when a dump directory is set, or on demand —
 * and read back by {@code ./nccl4j trace analyze DIR}, which finds the first collective where the
 * ranks diverge. Thread-safe. Each slot's entry is made once and then overwritten in place, so that
 * recording allocates nothing once the ring has filled.
 */
public final class FlightRecorder implements CollectiveObserver {
  /** Default number of operations kept, as PyTorch's TORCH_NCCL_TRACE_BUFFER_SIZE. */
  public static final int DEFAULT_CAPACITY = 2000;

  /** One operation. Times are microseconds since the epoch (comparable across processes), or 0. */
  public static final class Entry {
    /** PyTorch's sequence number (collectives and point-to-point counted apart). */
    public long seq;
    /** PyTorch's OpType name, e.g. {@code _REDUCE_SCATTER_BASE} ({@link io.nccl4j.OpType#torchName()}). */
    public String op;
    /** True for SEND and RECV, whose {@link #seq} is counted apart from the collectives'. */
    public boolean pointToPoint;
    /** Elements read (PyTorch's NumelIn); 0 without an input. */
    public long numelIn;
    /** Elements written (PyTorch's NumelOut); 0 without an output. */
    public long numelOut;
    /** PyTorch's name of the input's dtype (the output's when there is no input); empty for a barrier. */
    public String dtype;
    /** The reduction as {@link io.nccl4j.ReduceOp#toString()} prints it; empty for operations without one. */
    public String reduceOp;
    /** The root (broadcast, reduce) or peer (send, recv) rank; -1 otherwise. */
    public int peer;
    /** Elements sent to each rank by an all-to-all; null for other operations. */
    public long[] inputSplits;
    /** Elements received from each rank by an all-to-all; null for other operations. */
    public long[] outputSplits;
    /** scheduled, started, completed or failed. */
    public String state;
    /** When the group enqueued the operation. */
    public long enqueuedMicros;
    /** When it started executing; 0 while scheduled, or when the backend does not tell. */
    public long startedMicros;
    /** When it completed or failed; 0 until then. */
    public long completedMicros;
    /** The failure's message when {@link #state} is {@code failed}; null otherwise. */
    public String error;
  }

  private final int capacity;
  /*
   * The enqueueing thread and the completing thread (a backend's progress thread) each write only
   * memory of their own, so that recording does not move cache lines between them on every
   * operation. Enqueue side, under enqueueLock: next, the ring's entries (what was called) and
   * keys. Completion side, under completionLock: cursor and the per-slot arrays of what happened,
   * each tagged with the operation number it belongs to, so that a slot's next operation never
   * has to reset them. entries() takes both locks, in that order, and merges.
   */
  private final PaddedLock enqueueLock = new PaddedLock("FlightRecorder.enqueue");
  private final Entry[] ring;
  /** The operation each slot was last written for, and its number. */
  private final Collective[] keys;
  private final long[] indexOf;
  /**
   * Operations enqueued so far, published once the slot is filled: where a completion that is not
   * the oldest stops looking. On a line of its own, as is the cursor: both change on every
   * operation, each on its own thread, and sharing a line with each other or with the fields both
   * threads read would move it between them every time.
   */
  private final PaddedCounter next = new PaddedCounter();

  private final PaddedLock completionLock = new PaddedLock("FlightRecorder.completion");
  /** Operation number whose start or end the slot's times describe, or -1. */
  private final long[] startedOf;
  private final long[] completedOf;
  private final long[] startedMicros;
  private final long[] completedMicros;
  private final String[] errors;
  /** Every operation below this number has completed (or was overwritten). */
  private final PaddedCounter cursor = new PaddedCounter();

  private final long originNanos = System.nanoTime();
  private final long originMicros;

  /**
   * An empty recorder that keeps the last {@code capacity} operations.
   *
   * @throws IllegalArgumentException if {@code capacity} is below 1
   */
  public FlightRecorder(int capacity) {
    if (capacity < 1) {
      throw new IllegalArgumentException("flight recorder capacity must be >= 1, got " + capacity);
    }
    this.capacity = capacity;
    this.ring = new Entry[capacity];
    this.keys = new Collective[capacity];
    this.indexOf = new long[capacity];
    java.util.Arrays.fill(indexOf, -1);
    this.startedOf = new long[capacity];
    this.completedOf = new long[capacity];
    java.util.Arrays.fill(startedOf, -1);
    java.util.Arrays.fill(completedOf, -1);
    this.startedMicros = new long[capacity];
    this.completedMicros = new long[capacity];
    this.errors = new String[capacity];
    Instant now = Instant.now();
    this.originMicros = now.getEpochSecond() * 1_000_000 + now.getNano() / 1000;
  }

  /** The number of operations kept; older ones are overwritten. */
  public int capacity() {
    return capacity;
  }

  private long micros(long nanos) {
    return originMicros + (nanos - originNanos) / 1000;
  }

  private int slot(long i) {
    return (int) (i % capacity);
  }

  @Override
  public void enqueued(int rank, Collective c, String rangePath, long nanos) {
    synchronized (enqueueLock) {
      long n = next.get();
      int slot = slot(n);
      Entry e = ring[slot];
      if (e == null) {
        e = new Entry();
        ring[slot] = e;
      }
      keys[slot] = c;
      indexOf[slot] = n;
      e.seq = c.seq();
      e.op = c.op().torchName();
      e.pointToPoint = c.op().isPointToPoint();
      e.numelIn = c.numelIn();
      e.numelOut = c.numelOut();
      Collective.Buffer b = c.input() != null ? c.input() : c.output();
      e.dtype = b == null ? "" : b.dtype().torchName();
      e.reduceOp = c.reduceOp() == null ? "" : c.reduceOp().toString();
      e.peer = c.peer();
      e.inputSplits = c.inputSplits();
      e.outputSplits = c.outputSplits();
      e.enqueuedMicros = micros(nanos);
      next.setRelease(n + 1);
    }
  }

  /**
   * The number of {@code c}'s operation, or -1 once its slot was overwritten. Called under
   * completionLock. Operations of a group complete in the order they were enqueued, so this almost
   * always finds {@code c} at the cursor without reading {@code published}, the line the
   * enqueueing thread writes on every operation. (A completion is reported after its enqueue,
   * through the backend, so a key equal to {@code c} is visible with its number.)
   */
  private long find(Collective c) {
    long from = cursor.get();
    int s = slot(from);
    if (keys[s] == c && indexOf[s] == from) {
      return from;
    }
    long end = next.get();
    if (from < end - capacity) {
      // More operations in flight than the ring holds: the oldest were overwritten.
      from = advance(end - capacity);
    }
    for (long i = from; i < end; i++) {
      int t = slot(i);
      if (keys[t] == c && indexOf[t] == i) {
        return i;
      }
    }
    return -1;
  }

  /** Moves the cursor from {@code from} past every completed operation; returns where it stops. */
  private long advance(long from) {
    long i = from;
    while (completedOf[slot(i)] == i) {
      i++;
    }
    cursor.setRelease(i);
    return i;
  }

  @Override
  public void started(int rank, Collective c, long nanos) {
    synchronized (completionLock) {
      long i = find(c);
      if (i >= 0 && startedOf[slot(i)] != i) {
        startedMicros[slot(i)] = micros(nanos);
        startedOf[slot(i)] = i;
      }
    }
  }

  @Override
  public void completed(int rank, Collective c, CollectiveStats stats, Throwable error, long nanos) {
    synchronized (completionLock) {
      long i = find(c);
      if (i < 0 || completedOf[slot(i)] == i) {
        return;
      }
      int s = slot(i);
      completedMicros[s] = micros(nanos);
      errors[s] = error == null ? null : String.valueOf(error.getMessage());
      completedOf[s] = i;
      advance(cursor.get());
    }
  }

  /** The recorded operations, oldest first. */
  public List<Entry> entries() {
    synchronized (enqueueLock) {
      synchronized (completionLock) {
        List<Entry> out = new ArrayList<>();
        long end = next.get();
        for (long i = Math.max(0, end - capacity); i < end; i++) {
          int s = slot(i);
          Entry e = copy(ring[s]);
          boolean done = completedOf[s] == i;
          e.state = done ? (errors[s] == null ? "completed" : "failed") : startedOf[s] == i ? "started" : "scheduled";
          e.startedMicros = startedOf[s] == i ? startedMicros[s] : 0;
          e.completedMicros = done ? completedMicros[s] : 0;
          e.error = done ? errors[s] : null;
          out.add(e);
        }
        return out;
      }
    }
  }

  private static Entry copy(Entry e) {
    Entry c = new Entry();
    c.seq = e.seq;
    c.op = e.op;
    c.pointToPoint = e.pointToPoint;
    c.numelIn = e.numelIn;
    c.numelOut = e.numelOut;
    c.dtype = e.dtype;
    c.reduceOp = e.reduceOp;
    c.peer = e.peer;
    c.inputSplits = e.inputSplits;
    c.outputSplits = e.outputSplits;
    c.state = e.state;
    c.enqueuedMicros = e.enqueuedMicros;
    c.startedMicros = e.startedMicros;
    c.completedMicros = e.completedMicros;
    c.error = e.error;
    return c;
  }

  /** Writes this rank's dump: rank, world size, backend, why, and the entries. */
  public void dump(Path file, int rank, int worldSize, String backend, String reason) throws IOException {
    Map<String, Object> doc = new LinkedHashMap<>();
    doc.put("version", 1);
    doc.put("rank", rank);
    doc.put("worldSize", worldSize);
    doc.put("backend", backend);
    doc.put("reason", reason);
    Instant now = Instant.now();
    doc.put("dumpedMicros", now.getEpochSecond() * 1_000_000 + now.getNano() / 1000);
    doc.put("capacity", capacity);
    doc.put("entries", entries());
    Path parent = file.toAbsolutePath().getParent();
    if (parent != null) {
      Files.createDirectories(parent);
    }
    // Written beside its name and renamed onto it, so that a reader never takes a rank stopped mid-write for a dump
    // (an empty file read as one was rank 0's phantom); the unfinished file says whose it was.
    Path partial = file.resolveSibling(file.getFileName() + TraceAnalysis.PARTIAL);
    new ObjectMapper().enable(SerializationFeature.INDENT_OUTPUT).writeValue(partial.toFile(), doc);
    try {
      Files.move(partial, file, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
    } catch (AtomicMoveNotSupportedException e) {
      Files.move(partial, file, StandardCopyOption.REPLACE_EXISTING);
    }
  }
}
