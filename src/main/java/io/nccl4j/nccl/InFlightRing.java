package io.nccl4j.nccl;

import io.nccl4j.BackendException;
import io.nccl4j.internal.concurrent.PaddedCounter;
import io.nccl4j.internal.concurrent.PaddedLock;
import io.nccl4j.nccl.cuda.CudaEvent;
import io.nccl4j.nccl.cuda.CudaStream;
import io.nccl4j.spi.Backend.Completion;
import io.nccl4j.spi.Collective;

/**
 * The operations of one NCCL backend in flight, in a ring of slots that are reused, so that
 * enqueueing allocates nothing: operation number {@code i} (counting from 0) lives in
 * {@code slots[i & (slots.length - 1)]}. {@link #produced} counts operations published (by the one
 * thread that holds the communicator); {@link #consumed} counts those taken off, oldest first, by
 * the progress thread or a failure, each by compare-and-set, so that every operation is taken, and
 * completed, exactly once. A full ring is replaced by one twice as large holding the same slot
 * objects, so the ring (and the number of completion events, one per slot, kept for the backend's
 * lifetime) is the most operations ever in flight at once rounded up to a power of two.
 *
 * <p>A slot taken at {@code consumed == n} cannot have been reused meanwhile: reuse needs
 * {@code consumed > n}. So readers read a slot, then take it by CAS; a reader whose CAS fails lets
 * it be. {@link #lock} only orders slot reuse against {@link #find} (which must not see a slot's
 * event re-recorded for a later operation).
 */
final class InFlightRing {
  /**
   * A place in the ring. Written by the publisher before it publishes the operation's number
   * through {@code produced}; read by whoever takes it, before the compare-and-set that takes it
   * (after which the publisher may reuse the slot).
   */
  static final class Slot {
    Collective c;
    /** Every operation of a group that stands in flight under {@link #c}, its first; null for one operation. */
    java.util.List<Collective> group;
    Completion completion;
    long enqueued;
    /** Created on first use, destroyed by {@link #closeEvents}. */
    CudaEvent done;
    /**
     * Slots are allocated together; without padding the progress thread reading one and the
     * publisher filling the next would share a cache line.
     */
    @SuppressWarnings("unused")
    private long p1, p2, p3, p4, p5, p6, p7, p8, p9, p10, p11, p12;
  }

  private volatile Slot[] slots = grow(1, null, 0);
  final PaddedCounter produced = new PaddedCounter();
  final PaddedCounter consumed = new PaddedCounter();
  private final PaddedLock lock = new PaddedLock("InFlightRing.lock");
  /** The publisher's last look at {@code consumed}: read again only when the ring seems full. */
  private long consumedSeen;

  private static Slot slot(Slot[] ring, long n) {
    return ring[(int) (n & (ring.length - 1))];
  }

  private static Slot[] grow(int capacity, Slot[] old, long from) {
    Slot[] s = new Slot[capacity];
    if (old != null) {
      // Operations from..from+old.length-1 keep their slot objects at their new places.
      for (long i = from; i < from + old.length; i++) {
        s[(int) (i & (capacity - 1))] = old[(int) (i & (old.length - 1))];
      }
    }
    for (int i = 0; i < capacity; i++) {
      if (s[i] == null) {
        s[i] = new Slot();
      }
    }
    return s;
  }

  /** The slot of operation number {@code n}. */
  Slot slot(long n) {
    return slot(slots, n);
  }

  /**
   * Appends an operation: records its slot's completion event (created on first use) at the end of
   * {@code stream}, fills the slot and publishes it, growing the ring when it is full. One
   * publisher at a time (the holder of the communicator); under {@link #lock}, so that
   * {@link #withFound} never sees a slot's event re-recorded for a later operation.
   */
  void publish(Collective c, java.util.List<Collective> group, Completion completion, long enqueued, Nccl nccl,
      int device, CudaStream stream) {
    synchronized (lock) {
      long n = produced.get();
      Slot[] ring = slots;
      if (n - consumedSeen == ring.length && n - (consumedSeen = consumed.get()) == ring.length) {
        ring = grow(ring.length * 2, ring, n - ring.length);
        // Published before produced: a reader that sees the new operation sees the new ring.
        slots = ring;
      }
      Slot s = slot(ring, n);
      if (s.done == null) {
        s.done = CudaEvent.create(nccl, device, false);
      }
      s.done.record(stream);
      s.c = c;
      s.group = group;
      s.completion = completion;
      s.enqueued = enqueued;
      produced.set(n + 1);
    }
  }

  /** Takes operation {@code n} if nobody has; true when this caller is the one to complete it. */
  boolean take(long n) {
    return consumed.compareAndSet(n, n + 1);
  }

  /** True while an operation is in flight. */
  boolean isEmpty() {
    return consumed.get() == produced.get();
  }

  /**
   * The completion event of {@code c} while it is in flight (null once it has completed): newest
   * first, since a stream usually waits for a recent operation. The caller uses the event under
   * {@link #withFound}'s lock.
   */
  boolean withFound(Collective c, java.util.function.Consumer<CudaEvent> use) {
    synchronized (lock) {
      Slot[] ring = slots;
      long oldest = consumed.get();
      for (long i = produced.get() - 1; i >= oldest; i--) {
        Slot s = slot(ring, i);
        if (s.c == c) {
          use.accept(s.done);
          return true;
        }
      }
      return false;
    }
  }

  /**
   * Fails every operation in flight, oldest first: the first with {@code first}, the rest with
   * {@code rest}. Before failing one it hands its operations (one, or every operation of its group)
   * to {@code beforeFailing}: its kernel may still run, and their buffers are freed once it failed.
   */
  void drain(BackendException first, BackendException rest,
      java.util.function.Consumer<java.util.List<Collective>> beforeFailing, Completer completer) {
    boolean isFirst = true;
    while (true) {
      long n = consumed.get();
      if (n == produced.get()) {
        return;
      }
      Slot s = slot(n);
      Collective c = s.c;
      java.util.List<Collective> group = s.group;
      Completion completion = s.completion;
      // Unless the progress thread took it first (it completed meanwhile).
      if (take(n)) {
        beforeFailing.accept(group != null ? group : java.util.List.of(c));
        completer.complete(c, completion, isFirst ? first : rest);
        isFirst = false;
      }
    }
  }

  /** Reports one outcome. */
  interface Completer {
    void complete(Collective c, Completion completion, BackendException error);
  }

  /** Destroys every slot's event (at close, with nothing in flight). */
  void closeEvents() {
    synchronized (lock) {
      for (Slot s : slots) {
        if (s.done != null) {
          s.done.close();
          s.done = null;
        }
      }
    }
  }
}
