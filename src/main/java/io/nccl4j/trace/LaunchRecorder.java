package io.nccl4j.trace;

import io.nccl4j.CollectiveStats;
import io.nccl4j.spi.Collective;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Records every collective launch of the groups it observes: rank, operation, sequence number,
 * element counts, dtype, the range it was launched in, and enqueue and completion times. Counts
 * launches per range and operation (the kernel-evidence experiment) and feeds the Chrome trace.
 * Thread-safe.
 */
public final class LaunchRecorder implements CollectiveObserver {
  /** One launch. */
  public record Launch(int rank, String op, long seq, long numelIn, long numelOut, String dtype, String range,
      long enqueuedNanos, long completedNanos, boolean ok) {}

  private final Map<Long, Launch> open = new ConcurrentHashMap<>();
  private final List<Launch> done = new ArrayList<>();

  private static long key(int rank, Collective c) {
    return ((long) rank << 48) ^ ((long) c.op().ordinal() << 40) ^ c.seq();
  }

  @Override
  public void enqueued(int rank, Collective c, String rangePath, long nanos) {
    open.put(key(rank, c), new Launch(rank, c.op().torchName(), c.seq(), c.numelIn(), c.numelOut(),
        c.input() != null ? c.input().dtype().torchName() : c.output() != null ? c.output().dtype().torchName() : "",
        rangePath, nanos, -1, false));
  }

  @Override
  public void completed(int rank, Collective c, CollectiveStats stats, Throwable error, long nanos) {
    Launch l = open.remove(key(rank, c));
    if (l == null) {
      return;
    }
    Launch finished = new Launch(l.rank(), l.op(), l.seq(), l.numelIn(), l.numelOut(), l.dtype(), l.range(),
        l.enqueuedNanos(), nanos, error == null);
    synchronized (done) {
      done.add(finished);
    }
  }

  /** Completed launches, by enqueue time. */
  public List<Launch> launches() {
    List<Launch> copy;
    synchronized (done) {
      copy = new ArrayList<>(done);
    }
    copy.sort(Comparator.comparingLong(Launch::enqueuedNanos));
    return copy;
  }

  /**
   * Launches whose range path starts with {@code range} (e.g. "direct"), counted by operation
   * ({@code ALLREDUCE → 20}), over every rank.
   */
  public Map<String, Integer> countsInRange(String range) {
    Map<String, Integer> counts = new TreeMap<>();
    for (Launch l : launches()) {
      if (l.range().equals(range) || l.range().startsWith(range + "/")) {
        counts.merge(l.op(), 1, Integer::sum);
      }
    }
    return counts;
  }

  /** Forgets everything recorded. */
  public void clear() {
    open.clear();
    synchronized (done) {
      done.clear();
    }
  }
}
