package io.nccl4j.store;

import java.time.Duration;
import java.util.List;

/**
 * A key-value store the ranks of a group share for rendezvous (PyTorch's c10d Store): rank 0
 * publishes NCCL's unique id, the others read it; ranks count arrivals with {@link #add}.
 *
 * <p>Every blocking call has a timeout and fails with {@link StoreTimeoutException} naming the keys
 * and how long it waited. Implementations: {@link HashStore} (one JVM), TCP (processes), and
 * {@link PrefixStore} (a namespace inside another store). Thread-safe.
 */
public interface Store extends AutoCloseable {
  /** Sets {@code key} to {@code value}, waking readers waiting for it. */
  void set(String key, byte[] value);

  /** The value of {@code key}, waiting up to {@link #timeout()} for it to be set. */
  default byte[] get(String key) {
    return get(key, timeout());
  }

  /** The value of {@code key}, waiting up to {@code timeout} for it to be set. */
  byte[] get(String key, Duration timeout);

  /**
   * Atomically adds {@code delta} to the counter at {@code key} (created at 0) and returns the new
   * value. The value is stored as its decimal text, as PyTorch stores it.
   */
  long add(String key, long delta);

  /**
   * Sets {@code key} to {@code desired} if its current value equals {@code expected} (an empty
   * {@code expected} means "absent"); returns the value after the call.
   */
  byte[] compareSet(String key, byte[] expected, byte[] desired);

  /** Waits until every key exists, up to {@code timeout}. */
  void wait(List<String> keys, Duration timeout);

  /** True if every key exists now. */
  boolean check(List<String> keys);

  /** Removes {@code key}; true if it existed. */
  boolean deleteKey(String key);

  /** Number of keys. */
  long numKeys();

  /**
   * The values of {@code keys}, waiting up to {@code timeout} for all of them: one round trip where the store can
   * (PyTorch's MULTI_GET), so that a rank reading every rank's key does not pay one per rank.
   */
  default List<byte[]> multiGet(List<String> keys, Duration timeout) {
    wait(keys, timeout);
    List<byte[]> values = new java.util.ArrayList<>(keys.size());
    for (String k : keys) {
      values.add(get(k, timeout));
    }
    return values;
  }

  /** Sets each of {@code keys} to the value at the same index: one round trip where the store can (MULTI_SET). */
  default void multiSet(List<String> keys, List<byte[]> values) {
    checkPairs(keys, values);
    for (int i = 0; i < keys.size(); i++) {
      set(keys.get(i), values.get(i));
    }
  }

  /** Keys and values of a multiSet pair up. */
  static void checkPairs(List<String> keys, List<byte[]> values) {
    checkPairs("multiSet", keys, values);
  }

  /** Keys and values of {@code call} pair up. */
  static void checkPairs(String call, List<String> keys, List<byte[]> values) {
    if (keys.size() != values.size()) {
      throw new IllegalArgumentException(call + ": " + keys.size() + " keys and " + values.size() + " values; each"
          + " key needs one value");
    }
  }

  /**
   * Departure notices: asks the store to set each of {@code keys} to the value at the same index when this client's
   * connection to it ends — closed, reset, its process killed — unless the key is set by then. A rank registers
   * them for the keys its peers wait for before it publishes them, so that if it dies first they wake to the notice
   * instead of waiting out their timeout. Returns whether the store honours them: nccl4j's TCP store does (one
   * query, kept by its server for this connection); PyTorch's servers cannot and a store in this JVM has no
   * connection to lose, so by default nothing happens and the answer is false.
   */
  default boolean setOnDeparture(List<String> keys, List<byte[]> values) {
    checkPairs("setOnDeparture", keys, values);
    return false;
  }

  /**
   * Withdraws this client's departure notices of {@code keys} ({@link #setOnDeparture}), so that its connection's
   * end sets none of them: for a rank leaving a group whose keys are about to be deleted, whose notices would
   * otherwise set them again, into a namespace nobody reads, when its process exits. Keys without a notice are
   * ignored. Returns whether the store holds notices at all (false where {@link #setOnDeparture} is).
   */
  default boolean withdrawOnDeparture(List<String> keys) {
    return false;
  }

  /** Default timeout of {@link #get(String)}. */
  Duration timeout();

  @Override
  void close();
}
