package io.nccl4j.nccl;

import io.nccl4j.DeviceStream;
import io.nccl4j.nccl.cuda.CudaEvent;
import io.nccl4j.nccl.cuda.CudaStream;
import io.nccl4j.nccl.cuda.CurrentStreams;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.LongConsumer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * When one device's memory may be handed out again: not before the work that used it has ended. A
 * block's free waits for marks — events — recorded where that work was queued:
 *
 * <ul>
 *   <li>when its last holder releases it (a tensor's close), on that thread's current stream of the
 *       device and on every stream recorded as using it ({@code Tensor.recordStream}, PyTorch's
 *       {@code record_stream}; {@code Work.waitStream} records its consumer stream too), so that a
 *       kernel the application queued there, reading the tensor, ends before the memory is reused;
 *   <li>when a failure drained the operations in flight, on the communication stream after them
 *       ({@link #quarantine}): {@code ncclCommAbort} asks NCCL's kernels to stop but does not wait for
 *       them, and one may still write its buffers.
 * </ul>
 *
 * A free whose marks have all passed happens at once; the others wait in a queue, looked at (with
 * {@code cudaEventQuery}, which never blocks) at every allocation and free of the device. Nothing
 * waits for a mark on the host, and no stream is made to wait for one: an aborted kernel that never
 * ends keeps its own buffers out of use — they stay in quarantine — and nothing else, where making
 * the allocator's stream wait for it made every later allocation of the device, which synchronises
 * that stream, wait without end.
 */
final class StreamOrderedFrees {
  private static final Logger LOG = LoggerFactory.getLogger(StreamOrderedFrees.class);

  /** An event recorded for one or more blocks; destroyed once the last of them is freed. */
  private static final class Mark {
    final CudaEvent event;
    final AtomicInteger holders;

    Mark(CudaEvent event, int holders) {
      this.event = event;
      this.holders = new AtomicInteger(holders);
    }

    void drop() {
      if (holders.decrementAndGet() == 0) {
        event.close();
      }
    }
  }

  /** A free that waits for its marks. */
  private record Pending(long address, List<Mark> marks) {}

  private final Nccl nccl;
  private final int device;
  /** Frees the memory now (cudaFreeAsync, or cudaFree where the device has no memory pools). */
  private final LongConsumer freeNow;
  /** Whether a release marks the current stream: where frees are stream-ordered (cudaFree synchronises the device itself). */
  private final boolean markReleases;
  /** Per live block: the streams recorded as using it. */
  private final Map<Long, Set<Long>> usedBy = new ConcurrentHashMap<>();
  /** Per released (or drained) block: what its free waits for. */
  private final Map<Long, List<Mark>> marks = new ConcurrentHashMap<>();
  /** Frees still waiting, oldest first; guarded by itself. */
  private final Deque<Pending> waiting = new ArrayDeque<>();

  StreamOrderedFrees(Nccl nccl, int device, boolean markReleases, LongConsumer freeNow) {
    this.nccl = nccl;
    this.device = device;
    this.markReleases = markReleases;
    this.freeNow = freeNow;
  }

  /** {@code stream} uses the block at {@code address}: its free waits for what is queued there until its release. */
  void recordStream(long address, DeviceStream stream) {
    usedBy.computeIfAbsent(address, a -> ConcurrentHashMap.newKeySet()).add(stream.handle());
  }

  /**
   * The last holder of the block at {@code address} let it go, on the calling thread: marks the
   * calling thread's current stream and every stream recorded for the block.
   */
  void released(long address) {
    Set<Long> streams = usedBy.remove(address);
    if (!markReleases) {
      return;
    }
    List<Long> on = new ArrayList<>(2);
    on.add(CurrentStreams.of(device));
    if (streams != null) {
      for (long s : streams) {
        if (!on.contains(s)) {
          on.add(s);
        }
      }
    }
    nccl.setDevice(device);
    for (long stream : on) {
      add(address, mark(stream, 1));
    }
  }

  /** A new event recorded at the end of {@code stream}, for {@code holders} blocks. */
  private Mark mark(long stream, int holders) {
    CudaEvent e = CudaEvent.create(nccl, device, false);
    try {
      e.record(stream);
    } catch (RuntimeException ex) {
      e.close();
      throw ex;
    }
    return new Mark(e, holders);
  }

  /**
   * The blocks at {@code addresses} were used by operations a failure drained: their frees wait until
   * everything queued on {@code stream} so far (the aborted kernels) has ended, however long that is.
   */
  void quarantine(List<Long> addresses, CudaStream stream) {
    if (addresses.isEmpty()) {
      return;
    }
    nccl.setDevice(device);
    Mark m = mark(stream.handle(), addresses.size());
    for (long a : addresses) {
      add(a, m);
    }
  }

  private void add(long address, Mark m) {
    marks.computeIfAbsent(address, a -> new java.util.concurrent.CopyOnWriteArrayList<>()).add(m);
  }

  /** Frees the block at {@code address} once its marks have passed: now, or at a later {@link #reclaim}. */
  void free(long address) {
    usedBy.remove(address);
    List<Mark> m = marks.remove(address);
    if (m == null || passed(m)) {
      release(address, m);
    } else {
      synchronized (waiting) {
        waiting.add(new Pending(address, m));
      }
    }
    reclaim();
  }

  /** Frees every waiting block whose marks have passed. Never blocks. */
  void reclaim() {
    List<Pending> ready = null;
    synchronized (waiting) {
      for (Iterator<Pending> it = waiting.iterator(); it.hasNext();) {
        Pending p = it.next();
        if (passed(p.marks())) {
          it.remove();
          if (ready == null) {
            ready = new ArrayList<>();
          }
          ready.add(p);
        }
      }
    }
    if (ready != null) {
      for (Pending p : ready) {
        release(p.address(), p.marks());
      }
    }
  }

  /** Frees still waiting for their marks (quarantined ones among them). */
  int waiting() {
    synchronized (waiting) {
      return waiting.size();
    }
  }

  private void release(long address, List<Mark> m) {
    try {
      freeNow.accept(address);
    } finally {
      if (m != null) {
        for (Mark mark : m) {
          mark.drop();
        }
      }
    }
  }

  /**
   * True when every mark has passed. A query that fails (a broken context) counts as not passed:
   * memory is handed out again only when it is known to be idle.
   */
  private boolean passed(List<Mark> m) {
    for (Mark mark : m) {
      try {
        if (!mark.event.isComplete()) {
          return false;
        }
      } catch (RuntimeException e) {
        LOG.debug("cuda:{}: a free waits on: {}", device, e.getMessage());
        return false;
      }
    }
    return true;
  }
}
