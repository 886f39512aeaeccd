package io.nccl4j.store;

import java.io.DataInputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

/**
 * The fields of the query a {@link StoreConnection} is reading, held to the caps ({@link ListenerLimits}) before
 * their bytes are read and read as they arrive: each field to its own cap, all the fields of one query together to
 * the frame's cap. A field over its own cap that the frame still holds is skipped and remembered ({@link #refused}),
 * so that an nccl4j client hears why and its connection stays in step.
 */
final class QueryFields {
  private final StoreHandshake.Link link;
  private final ListenerLimits limits;
  private final String peer;
  private final DataInputStream in;
  /** Bytes the fields of the query being read may still take (a query of many fields has one cap). */
  private long budget;
  /** The first field of this query that was over its cap (and skipped), or null. */
  private String refused;

  QueryFields(StoreHandshake.Link link, ListenerLimits limits, String peer) {
    this.link = link;
    this.limits = limits;
    this.peer = peer;
    this.in = link.in;
  }

  /** Before the fields of the next query. */
  void start() {
    budget = limits.maxFrameBytes();
    refused = null;
  }

  /** Why a field of this query was skipped, or null when none was. */
  String refused() {
    return refused;
  }

  long count() throws IOException {
    long n = Wire.readU64(in);
    if (n < 0 || n > limits.maxKeyBytes()) {
      throw StoreConnection.Fatal.told(link, new Wire.LimitException("a count", n, limits.maxKeyBytes(), "keys",
          "NCCL4J_STORE_MAX_KEY_BYTES", peer).getMessage());
    }
    return n;
  }

  List<String> keys() throws IOException {
    long n = count();
    // Grown as keys arrive: a count is a claim, not a size to allocate.
    List<String> keys = new ArrayList<>();
    for (long i = 0; i < n; i++) {
      keys.add(key());
    }
    return keys;
  }

  /** A key, or null when it was skipped. */
  String key() throws IOException {
    byte[] b = field(limits.maxKeyBytes(), "a key", "NCCL4J_STORE_MAX_KEY_BYTES");
    return b == null ? null : new String(b, StandardCharsets.UTF_8);
  }

  /** A value, or null when it was skipped. */
  byte[] value() throws IOException {
    return field(limits.maxValueBytes(), "a value", "NCCL4J_STORE_MAX_VALUE_BYTES");
  }

  /**
   * A field held to its cap and to what is left of the query's cap. One over its own cap is skipped when the query
   * still fits its cap: an nccl4j client hears why and goes on. One beyond that cannot be skipped in reason, and a
   * PyTorch client cannot be told: either ends the connection.
   */
  private byte[] field(int cap, String what, String setting) throws IOException {
    long n = Wire.readU64(in);
    if (n >= 0 && n <= cap && n <= budget) {
      budget -= n;
      return Wire.readAsItArrives(in, (int) n, what);
    }
    String why = n >= 0 && n <= cap
        ? new Wire.LimitException("a query", limits.maxFrameBytes() - budget + n, limits.maxFrameBytes(),
            "NCCL4J_STORE_MAX_VALUE_BYTES", peer).getMessage()
        : new Wire.LimitException(what, n, cap, setting, peer).getMessage();
    if (n < 0 || n > budget || !link.nccl4j) {
      throw StoreConnection.Fatal.told(link, why);
    }
    Wire.skip(in, n);
    budget -= n;
    if (refused == null) {
      refused = why;
    }
    return null;
  }
}
