package io.nccl4j.store;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.function.BiConsumer;
import java.util.function.Predicate;

/**
 * What a {@link TcpStoreServer} serves, as PyTorch's libuv server keeps it: the keys (a {@link HashStore}), the
 * queues of queue_push, and the waits pending on both ({@link PendingWaits}), under one lock, so that a write and
 * the waits it releases are one step, as they are on PyTorch's server's one thread. A queue is not a key: GET,
 * GETNUMKEYS and LIST_KEYS do not see it, but CHECK and WAIT take a non-empty queue for a set key, which is how
 * PyTorch's client blocks in queue_pop (a WAIT for the queue's key, then QUEUE_POP). Its connections wait here,
 * each on its own thread ({@link StoreConnection}).
 */
final class ServerStore {
  /** A queue over its cap; the message names the queue, the cap and the peer. */
  static final class QueueFullException extends Exception {
    private static final long serialVersionUID = 1L;

    QueueFullException(String message) {
      super(message);
    }
  }

  /**
   * What QUEUE_POP answers: the queue's length before the pop (PyTorch's client reads 0 as "queue is empty"), and
   * the item taken, or null when there was none.
   */
  record Popped(long length, byte[] item) {}

  /** A queue's items and their bytes, counted against the caps as they come. */
  private static final class Queue {
    final ArrayDeque<byte[]> items = new ArrayDeque<>();
    long bytes;
  }

  // No timeout of its own: a client's wait times out on the client (CANCEL_WAIT).
  private final HashStore values = new HashStore(Duration.ofDays(365));
  private final Map<String, Queue> queues = new HashMap<>();
  private final PendingWaits waits = new PendingWaits();
  /** Who sees the writes of which keys ({@link #watch}). */
  private final List<Watch> watches = new CopyOnWriteArrayList<>();
  private boolean closed;

  private record Watch(Predicate<String> keys, BiConsumer<String, byte[]> listener) {}

  /** From now on, {@code listener} sees every write of a key {@code keys} accepts: its key and new value. */
  void watch(Predicate<String> keys, BiConsumer<String, byte[]> listener) {
    watches.add(new Watch(keys, listener));
  }

  synchronized void set(String key, byte[] value) {
    ensureOpen();
    values.set(key, value);
    written(key);
  }

  synchronized void append(String key, byte[] value) {
    ensureOpen();
    values.append(key, value);
    written(key);
  }

  synchronized byte[] compareSet(String key, byte[] expected, byte[] desired) {
    ensureOpen();
    byte[] before = values.getNow(key);
    byte[] v = values.compareSet(key, expected, desired);
    // PyTorch's server wakes the key's waiters even when the call set nothing, so that a woken reader can find the key
    // absent; here only a key that is set after the call releases them, and only a change is a write to watchers.
    if (values.getNow(key) != null) {
      wake(key);
      if (before == null || !java.util.Arrays.equals(before, v)) {
        watched(key);
      }
    }
    return v;
  }

  /** Sets {@code key} only when it is absent (a departure notice); true when it did, and the write woke its waits. */
  synchronized boolean setIfAbsent(String key, byte[] value) {
    ensureOpen();
    if (!values.setIfAbsent(key, value)) {
      return false;
    }
    written(key);
    return true;
  }

  /** Throws NumberFormatException, and changes nothing, when the value of {@code key} is not a number. */
  synchronized long add(String key, long delta) {
    ensureOpen();
    long v = values.add(key, delta);
    written(key);
    return v;
  }

  /** The value of {@code key} now, or null. */
  synchronized byte[] getNow(String key) {
    ensureOpen();
    return values.getNow(key);
  }

  synchronized boolean deleteKey(String key) {
    ensureOpen();
    return values.deleteKey(key);
  }

  synchronized long numKeys() {
    ensureOpen();
    return values.numKeys();
  }

  /** Every key, as the client sent it (with PyTorch's "/"), in no order; not the queues. */
  synchronized List<String> listKeys() {
    ensureOpen();
    return values.keys();
  }

  /** True when each key is set or names a non-empty queue (CHECK, and a WAIT answered at once). */
  synchronized boolean present(List<String> keys) {
    ensureOpen();
    for (String k : keys) {
      Queue q = queues.get(k);
      if (!values.check(List.of(k)) && (q == null || q.items.isEmpty())) {
        return false;
      }
    }
    return true;
  }

  /**
   * Appends {@code item} to the queue {@code key} (created empty) and wakes the first wait on it.
   *
   * @throws QueueFullException when the queue would hold more than {@code limits} allow; nothing is pushed
   */
  synchronized void push(String key, byte[] item, ListenerLimits limits, String peer) throws QueueFullException {
    ensureOpen();
    Queue q = queues.computeIfAbsent(key, k -> new Queue());
    if (q.items.size() >= limits.maxQueueItems()) {
      throw new QueueFullException("queue '" + key + "' holds " + q.items.size() + " items: a push from " + peer
          + " would exceed the cap of " + limits.maxQueueItems() + " items (NCCL4J_STORE_MAX_QUEUE_ITEMS)");
    }
    if (q.bytes + item.length > limits.maxValueBytes()) {
      throw new QueueFullException("queue '" + key + "' holds " + q.bytes + " bytes: a push of " + item.length
          + " bytes from " + peer + " would exceed the cap of " + limits.maxValueBytes() + " bytes of a queue"
          + " (NCCL4J_STORE_MAX_VALUE_BYTES)");
    }
    q.items.add(item);
    q.bytes += item.length;
    waits.pushed(key);
    notifyAll();
  }

  /** Takes the first item of the queue {@code key}, if it has one; an empty queue is forgotten. */
  synchronized Popped pop(String key) {
    ensureOpen();
    Queue q = queues.get(key);
    if (q == null) {
      return new Popped(0, null);
    }
    long length = q.items.size();
    byte[] item = q.items.poll();
    if (item != null) {
      q.bytes -= item.length;
    }
    if (q.items.isEmpty()) {
      // PyTorch's server keeps an empty queue for ever; forgetting it changes no answer and bounds what pops cost.
      queues.remove(key);
    }
    return new Popped(length, item);
  }

  synchronized long queueLen(String key) {
    ensureOpen();
    Queue q = queues.get(key);
    return q == null ? 0 : q.items.size();
  }

  /**
   * A WAIT for {@code keys}: null when they are all present now (STOP_WAITING at once), else the wait for those
   * not set, as PyTorch's server counts them (a key of a non-empty queue among missing ones is awaited too).
   */
  synchronized PendingWaits.Wait startWait(List<String> keys) {
    if (present(keys)) {
      return null;
    }
    return waits.add(keys.stream().filter(k -> !values.check(List.of(k))).toList());
  }

  /**
   * A BARRIER: adds one arrival to the decimal counter at {@code key}; null when that makes {@code worldSize} or
   * more (STOP_WAITING at once, and every wait on the key is released), else the wait for the next write of the key.
   *
   * @throws NumberFormatException when the value of {@code key} is not a number; nothing changes
   */
  synchronized PendingWaits.Wait barrier(String key, long worldSize) {
    ensureOpen();
    byte[] old = values.getNow(key);
    long count = old == null ? 1 : Long.parseLong(new String(old, StandardCharsets.UTF_8)) + 1;
    // PyTorch's server stores the count without waking anyone, until the last arrival.
    values.set(key, Long.toString(count).getBytes(StandardCharsets.UTF_8));
    if (count >= worldSize) {
      written(key);
      return null;
    }
    return waits.add(List.of(key));
  }

  /**
   * Waits up to {@code nanos} for {@code w} to be done; the server's thread for {@code w}'s client looks at its
   * socket in between.
   *
   * @throws IllegalStateException when the store closes meanwhile
   */
  synchronized boolean await(PendingWaits.Wait w, long nanos) throws InterruptedException {
    long deadline = System.nanoTime() + nanos;
    while (true) {
      ensureOpen();
      if (w.done()) {
        return true;
      }
      long left = deadline - System.nanoTime();
      if (left <= 0) {
        return false;
      }
      wait(Math.max(1, left / 1_000_000));
    }
  }

  /** Forgets {@code w}; true when it was done already, so that its client is still owed STOP_WAITING. */
  synchronized boolean cancel(PendingWaits.Wait w) {
    return waits.cancel(w);
  }

  /** How many WAITs and BARRIERs (blocking pops among them) still await {@code key}. */
  synchronized int pendingWaits(String key) {
    return waits.pending(key);
  }

  /** Closes the store: pending waits end with IllegalStateException. */
  synchronized void close() {
    closed = true;
    values.close();
    notifyAll();
  }

  private void written(String key) {
    wake(key);
    watched(key);
  }

  private void wake(String key) {
    waits.written(key);
    notifyAll();
  }

  private void watched(String key) {
    for (Watch w : watches) {
      byte[] v;
      if (w.keys().test(key) && (v = values.getNow(key)) != null) {
        try {
          w.listener().accept(key, v.clone());
        } catch (RuntimeException e) {
          // a watcher's mistake must not fail the client whose write it watched: the write is applied
        }
      }
    }
  }

  private void ensureOpen() {
    if (closed) {
      throw new IllegalStateException("the store is closed");
    }
  }
}
