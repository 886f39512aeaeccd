package io.nccl4j.store;

import io.nccl4j.internal.concurrent.Durations;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;

/** A {@link Store} in this JVM (PyTorch's HashStore), for ranks that are threads. */
public final class HashStore implements Store {
  private final Map<String, byte[]> map = new HashMap<>();
  private final Duration timeout;
  private boolean closed;
  /** Threads blocked in a get or wait for keys not yet set. */
  private int waiting;

  /** An empty store whose {@link #get(String)} waits up to {@code timeout} by default. */
  public HashStore(Duration timeout) {
    this.timeout = Objects.requireNonNull(timeout, "timeout");
  }

  /** An empty store with a default wait of 5 minutes. */
  public HashStore() {
    this(Duration.ofMinutes(5));
  }

  @Override
  public synchronized void set(String key, byte[] value) {
    ensureOpen();
    map.put(Objects.requireNonNull(key, "key"), value.clone());
    notifyAll();
  }

  @Override
  public synchronized byte[] get(String key, Duration wait) {
    waitFor(List.of(key), wait);
    return map.get(key).clone();
  }

  @Override
  public synchronized long add(String key, long delta) {
    ensureOpen();
    byte[] old = map.get(key);
    long v = (old == null ? 0 : Long.parseLong(new String(old, StandardCharsets.UTF_8))) + delta;
    map.put(key, Long.toString(v).getBytes(StandardCharsets.UTF_8));
    notifyAll();
    return v;
  }

  @Override
  public synchronized byte[] compareSet(String key, byte[] expected, byte[] desired) {
    ensureOpen();
    byte[] cur = map.get(key);
    boolean matches = cur == null ? expected.length == 0 : Arrays.equals(cur, expected);
    if (matches) {
      map.put(key, desired.clone());
      notifyAll();
      return desired.clone();
    }
    return cur == null ? expected.clone() : cur.clone();
  }

  @Override
  public synchronized void wait(List<String> keys, Duration wait) {
    waitFor(keys, wait);
  }

  private void waitFor(List<String> keys, Duration wait) {
    long deadline = Durations.deadlineFromNow(wait);
    while (true) {
      ensureOpen();
      if (map.keySet().containsAll(keys)) {
        return;
      }
      long left = deadline - System.nanoTime();
      if (left <= 0) {
        throw new StoreTimeoutException("HashStore: timed out after " + Durations.describe(wait) + " waiting for keys "
            + keys + " (missing: " + keys.stream().filter(k -> !map.containsKey(k)).toList() + ")");
      }
      waiting++;
      try {
        wait(Math.max(1, left / 1_000_000));
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new StoreTimeoutException("HashStore: interrupted while waiting for keys " + keys);
      } finally {
        waiting--;
      }
    }
  }

  /** How many threads are blocked in a get or wait now: what a test waits for before it sets a key they await. */
  synchronized int waiting() {
    return waiting;
  }

  /** The value of {@code key} now, or null. */
  synchronized byte[] getNow(String key) {
    ensureOpen();
    byte[] v = map.get(key);
    return v == null ? null : v.clone();
  }

  /** Appends {@code value} to the value of {@code key} (created empty), as PyTorch's APPEND does. */
  synchronized void append(String key, byte[] value) {
    ensureOpen();
    byte[] old = map.get(key);
    byte[] v = old == null ? value.clone() : Arrays.copyOf(old, old.length + value.length);
    if (old != null) {
      System.arraycopy(value, 0, v, old.length, value.length);
    }
    map.put(key, v);
    notifyAll();
  }

  /**
   * Sets {@code key} to {@code value} only when it is absent, waking readers; true when it set it. Unlike {@link
   * #compareSet} with an empty expected value, a key set to an empty value counts as present.
   */
  synchronized boolean setIfAbsent(String key, byte[] value) {
    ensureOpen();
    if (map.containsKey(key)) {
      return false;
    }
    map.put(key, value.clone());
    notifyAll();
    return true;
  }

  /** Every key now, in no order. */
  synchronized List<String> keys() {
    ensureOpen();
    return List.copyOf(map.keySet());
  }

  @Override
  public synchronized boolean check(List<String> keys) {
    ensureOpen();
    return map.keySet().containsAll(keys);
  }

  @Override
  public synchronized boolean deleteKey(String key) {
    ensureOpen();
    return map.remove(key) != null;
  }

  @Override
  public synchronized long numKeys() {
    ensureOpen();
    return map.size();
  }

  @Override
  public Duration timeout() {
    return timeout;
  }

  @Override
  public synchronized void close() {
    closed = true;
    notifyAll();
  }

  private void ensureOpen() {
    if (closed) {
      throw new IllegalStateException("HashStore is closed");
    }
  }
}
