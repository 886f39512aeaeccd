package io.nccl4j.trace;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import io.nccl4j.CollectiveStats;
import io.nccl4j.spi.Collective;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Instant;
import java.util.ArrayList;
import java.util.IdentityHashMap;
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
    public long seq;
    public String op;
    public boolean pointToPoint;
    public long numelIn;
    public long numelOut;
    public String dtype;
    public String reduceOp;
    public int peer;
    public long[] inputSplits;
    public long[] outputSplits;
    public String state;
    public long enqueuedMicros;
    public long startedMicros;
    public long completedMicros;
    public String error;
  }

  private final int capacity;
  private final Entry[] ring;
  /** The operation each slot was last written for, to forget it when the slot is overwritten. */
  private final Collective[] keys;
  /** Entries of the operations that have not completed yet. */
  private final Map<Collective, Entry> live = new IdentityHashMap<>();
  private final long originNanos = System.nanoTime();
  private final long originMicros;
  private long next;

  public FlightRecorder(int capacity) {
    if (capacity < 1) {
      throw new IllegalArgumentException("flight recorder capacity must be >= 1, got " + capacity);
    }
    this.capacity = capacity;
    this.ring = new Entry[capacity];
    this.keys = new Collective[capacity];
    Instant now = Instant.now();
    this.originMicros = now.getEpochSecond() * 1_000_000 + now.getNano() / 1000;
  }

  public int capacity() {
    return capacity;
  }

  private long micros(long nanos) {
    return originMicros + (nanos - originNanos) / 1000;
  }

  @Override
  public synchronized void enqueued(int rank, Collective c, String rangePath, long nanos) {
    int slot = (int) (next++ % capacity);
    Entry e = ring[slot];
    if (e == null) {
      e = new Entry();
      ring[slot] = e;
    } else {
      // Only if still live for this entry: the same operation may have been recorded again since.
      live.remove(keys[slot], e);
    }
    keys[slot] = c;
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
    e.state = "scheduled";
    e.enqueuedMicros = micros(nanos);
    e.startedMicros = 0;
    e.completedMicros = 0;
    e.error = null;
    live.put(c, e);
  }

  @Override
  public synchronized void started(int rank, Collective c, long nanos) {
    Entry e = live.get(c);
    if (e != null && e.state.equals("scheduled")) {
      e.state = "started";
      e.startedMicros = micros(nanos);
    }
  }

  @Override
  public synchronized void completed(int rank, Collective c, CollectiveStats stats, Throwable error, long nanos) {
    Entry e = live.remove(c);
    if (e != null) {
      e.state = error == null ? "completed" : "failed";
      e.completedMicros = micros(nanos);
      e.error = error == null ? null : String.valueOf(error.getMessage());
    }
  }

  /** The recorded operations, oldest first. */
  public synchronized List<Entry> entries() {
    List<Entry> out = new ArrayList<>();
    long first = Math.max(0, next - capacity);
    for (long i = first; i < next; i++) {
      out.add(copy(ring[(int) (i % capacity)]));
    }
    return out;
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
    new ObjectMapper().enable(SerializationFeature.INDENT_OUTPUT).writeValue(file.toFile(), doc);
  }
}
