package io.nccl4j.store;

import io.nccl4j.Settings;
import java.time.Duration;
import java.util.Map;

/**
 * What a listener accepts from a peer before trusting it: bytes read from a socket are hostile until the
 * handshake proves otherwise, so nothing is allocated by a length read from the wire beyond these caps, and a
 * peer that says too little within {@link #handshakeTimeout} is dropped. Each is set by a system property or,
 * failing that, an environment variable (docs/RENDEZVOUS.md).
 *
 * @param maxKeyBytes the longest store key (and the most keys of one request): {@code nccl4j.store.maxKeyBytes},
 *     {@code NCCL4J_STORE_MAX_KEY_BYTES}, default 64 KiB
 * @param maxValueBytes the largest store value: {@code nccl4j.store.maxValueBytes},
 *     {@code NCCL4J_STORE_MAX_VALUE_BYTES}, default 512 MiB
 * @param maxQueueItems the most items one of the store's queues (PyTorch's queue_push) holds; its bytes are held
 *     to {@code maxValueBytes} as well: {@code nccl4j.store.maxQueueItems}, {@code NCCL4J_STORE_MAX_QUEUE_ITEMS},
 *     default 65,536
 * @param handshakeTimeout how long a new connection may take to introduce itself (store and transport):
 *     {@code nccl4j.handshakeTimeoutMs}, {@code NCCL4J_HANDSHAKE_TIMEOUT_MS}, default 5 s
 */
public record ListenerLimits(int maxKeyBytes, int maxValueBytes, int maxQueueItems, Duration handshakeTimeout) {
  private static final int DEFAULT_QUEUE_ITEMS = 1 << 16;

  /** The defaults. */
  public static final ListenerLimits DEFAULT = new ListenerLimits(64 << 10, 512 << 20, DEFAULT_QUEUE_ITEMS,
      Duration.ofSeconds(5));

  /**
   * Checks the numbers.
   *
   * @throws IllegalArgumentException when a cap is below 1 or the timeout is not positive
   */
  public ListenerLimits {
    if (maxKeyBytes < 1 || maxValueBytes < 1 || maxQueueItems < 1 || handshakeTimeout.isNegative()
        || handshakeTimeout.isZero()) {
      throw new IllegalArgumentException("listener limits must be positive, got key " + maxKeyBytes + " B, value "
          + maxValueBytes + " B, queue " + maxQueueItems + " items, handshake " + handshakeTimeout.toMillis() + " ms");
    }
  }

  /**
   * These caps with the default queue cap.
   *
   * @throws IllegalArgumentException when a cap is below 1 or the timeout is not positive
   */
  public ListenerLimits(int maxKeyBytes, int maxValueBytes, Duration handshakeTimeout) {
    this(maxKeyBytes, maxValueBytes, DEFAULT_QUEUE_ITEMS, handshakeTimeout);
  }

  /** From the system properties and this process's environment. */
  public static ListenerLimits fromEnvironment() {
    return from(System.getenv());
  }

  static ListenerLimits from(Map<String, String> env) {
    return new ListenerLimits(
        (int) setting(env, Settings.STORE_MAX_KEY_BYTES_PROPERTY, Settings.NCCL4J_STORE_MAX_KEY_BYTES,
            DEFAULT.maxKeyBytes),
        (int) setting(env, Settings.STORE_MAX_VALUE_BYTES_PROPERTY, Settings.NCCL4J_STORE_MAX_VALUE_BYTES,
            DEFAULT.maxValueBytes),
        (int) setting(env, Settings.STORE_MAX_QUEUE_ITEMS_PROPERTY, Settings.NCCL4J_STORE_MAX_QUEUE_ITEMS,
            DEFAULT.maxQueueItems),
        Duration.ofMillis(setting(env, Settings.HANDSHAKE_TIMEOUT_MS_PROPERTY, Settings.NCCL4J_HANDSHAKE_TIMEOUT_MS,
            DEFAULT.handshakeTimeout.toMillis())));
  }

  private static long setting(Map<String, String> env, Settings property, Settings variable, long dflt) {
    String p = property.get();
    String name = p != null ? property.key() : variable.key();
    String v = p != null ? p : variable.in(env);
    if (v == null || v.isBlank()) {
      return dflt;
    }
    try {
      long n = Long.parseLong(v.trim());
      if (n < 1 || n > Integer.MAX_VALUE - 8) {
        throw new IllegalArgumentException(name + " must be in 1.." + (Integer.MAX_VALUE - 8) + ", got " + n);
      }
      return n;
    } catch (NumberFormatException e) {
      throw new IllegalArgumentException(name + " must be an integer, got '" + v + "'");
    }
  }

  /** The largest frame: a compare-and-set carries a key and two values. */
  long maxFrameBytes() {
    return Math.min(Integer.MAX_VALUE - 8L, 2L * maxValueBytes + maxKeyBytes + 64);
  }
}
