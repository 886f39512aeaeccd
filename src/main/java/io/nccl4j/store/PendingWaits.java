package io.nccl4j.store;

import java.util.ArrayDeque;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * The WAITs and BARRIERs of a {@link TcpStoreServer} not yet answered, released by the rules of PyTorch's libuv
 * server, which counts for each wait the keys it still awaits. A write of a key (SET, ADD, APPEND, MULTI_SET,
 * every COMPARE_SET — PyTorch's wakes its waiters even when it sets nothing —, the BARRIER that completes) counts
 * that key for every wait on it. A push to a queue counts its key for the waits on it in the order they came, until
 * one of them has every key: so one item wakes one blocked pop, as PyTorch's does, and not every pop waiting for
 * the queue. Unlike PyTorch's, a wait that a key was counted for leaves that key's list: a second push cannot count
 * the same key again, nor reach a later wait of the same connection. Not thread-safe: the {@link ServerStore} that
 * holds it guards it with its lock.
 */
final class PendingWaits {
  /** One pending WAIT or BARRIER of one connection. */
  static final class Wait {
    private final List<String> keys;
    private int left;

    private Wait(List<String> keys) {
      this.keys = List.copyOf(keys);
      this.left = keys.size();
    }

    /** True when every key it awaited has been counted: its client is owed STOP_WAITING. */
    boolean done() {
      return left == 0;
    }

    @Override
    public String toString() {
      return keys.toString();
    }
  }

  /** For each key, the waits that still await it, in the order they came (a wait twice when it named the key twice). */
  private final Map<String, ArrayDeque<Wait>> byKey = new HashMap<>();

  /** A wait for {@code keys}, which are not set yet (an empty list is done at once). */
  Wait add(List<String> keys) {
    Wait w = new Wait(keys);
    for (String k : w.keys) {
      byKey.computeIfAbsent(k, x -> new ArrayDeque<>()).add(w);
    }
    return w;
  }

  /** {@code key} was written: every wait on it counts it. */
  void written(String key) {
    ArrayDeque<Wait> waits = byKey.remove(key);
    if (waits != null) {
      waits.forEach(w -> w.left--);
    }
  }

  /** An item was pushed to the queue {@code key}: the waits on it count it in turn, until one is done. */
  void pushed(String key) {
    ArrayDeque<Wait> waits = byKey.get(key);
    if (waits == null) {
      return;
    }
    while (!waits.isEmpty()) {
      Wait w = waits.poll();
      if (--w.left == 0) {
        break;
      }
    }
    if (waits.isEmpty()) {
      byKey.remove(key);
    }
  }

  /** How many waits still await {@code key}: what a test waits for before it writes the key. */
  int pending(String key) {
    ArrayDeque<Wait> waits = byKey.get(key);
    return waits == null ? 0 : waits.size();
  }

  /** Forgets {@code w} (CANCEL_WAIT, a new wait, its client gone); true when it was done already. */
  boolean cancel(Wait w) {
    for (String k : w.keys) {
      ArrayDeque<Wait> waits = byKey.get(k);
      if (waits != null && waits.removeIf(x -> x == w) && waits.isEmpty()) {
        byKey.remove(k);
      }
    }
    return w.done();
  }
}
