package io.nccl4j.store;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The departure notices of one client of a {@link TcpStoreServer} ({@link Store#setOnDeparture}): keys the server
 * sets, each to its value, when the client's connection ends and the key is not set by then. A client that dies
 * before it publishes what its peers wait for thus wakes them with the notice instead of leaving them to their
 * timeout.
 *
 * <p>What a connection registers is held to the listener's caps, since an admitted client is still a socket: at
 * most {@link ListenerLimits#maxKeyBytes} notices (the most keys one query may name), keys and values together at
 * most {@link ListenerLimits#maxValueBytes} (one value's worth). When a registration would pass either, the notices
 * whose keys are set already are dropped first — they could only fire after their key was deleted, and nccl4j
 * deletes a group's keys only once every member has withdrawn its notices ({@link #withdraw}) — and a registration
 * that still does not fit is refused whole.
 */
final class DepartureNotices {
  private final Map<String, byte[]> notices = new LinkedHashMap<>();
  private final ListenerLimits limits;
  private final String peer;
  /** Bytes of the keys and values held. */
  private long bytes;

  DepartureNotices(ListenerLimits limits, String peer) {
    this.limits = limits;
    this.peer = peer;
  }

  private static long size(String key, byte[] value) {
    return key.getBytes(StandardCharsets.UTF_8).length + (long) value.length;
  }

  /**
   * Keeps a notice for each key (a key registered again takes the new value). Null when kept; else why not, and
   * nothing of the registration is kept.
   */
  String register(List<String> keys, List<byte[]> values, ServerStore store) {
    if (over(keys, values) != null) {
      notices.keySet().removeIf(k -> store.getNow(k) != null);
      bytes = 0;
      notices.forEach((k, v) -> bytes += size(k, v));
      String over = over(keys, values);
      if (over != null) {
        return "the departure notices of " + peer + " " + over + " with this registration of " + keys.size()
            + " keys; none of it was kept";
      }
    }
    for (int i = 0; i < keys.size(); i++) {
      byte[] old = notices.put(keys.get(i), values.get(i));
      bytes += size(keys.get(i), values.get(i)) - (old == null ? 0 : size(keys.get(i), old));
    }
    return null;
  }

  /** Null when {@code keys} fit beside the notices held; else which cap they would pass, and by how much. */
  private String over(List<String> keys, List<byte[]> values) {
    long n = count(keys);
    if (n > limits.maxKeyBytes()) {
      return "would number " + n + ", over the cap of " + limits.maxKeyBytes() + " notices one connection may hold"
          + " (NCCL4J_STORE_MAX_KEY_BYTES)";
    }
    long b = bytes + added(keys, values);
    if (b > limits.maxValueBytes()) {
      return "would hold " + b + " bytes, over the cap of " + limits.maxValueBytes() + " bytes one connection's"
          + " notices may hold (NCCL4J_STORE_MAX_VALUE_BYTES)";
    }
    return null;
  }

  /** How many notices there would be with {@code keys}. */
  private long count(List<String> keys) {
    return notices.size() + keys.stream().distinct().filter(k -> !notices.containsKey(k)).count();
  }

  /** How many bytes {@code keys} would add (a key held already: the difference of its values). */
  private long added(List<String> keys, List<byte[]> values) {
    Map<String, byte[]> last = new LinkedHashMap<>();
    for (int i = 0; i < keys.size(); i++) {
      last.put(keys.get(i), values.get(i));
    }
    long n = 0;
    for (Map.Entry<String, byte[]> e : last.entrySet()) {
      byte[] old = notices.get(e.getKey());
      n += size(e.getKey(), e.getValue()) - (old == null ? 0 : size(e.getKey(), old));
    }
    return n;
  }

  /** Drops the notices of {@code keys} (those without one are ignored): their group is gone, and so are its keys. */
  void withdraw(List<String> keys) {
    for (String k : keys) {
      byte[] old = notices.remove(k);
      if (old != null) {
        bytes -= size(k, old);
      }
    }
  }

  /**
   * The connection ended: sets each key that is not set now, in the order registered, waking its readers. Returns
   * the keys it set.
   */
  List<String> apply(ServerStore store) {
    List<String> set = new ArrayList<>();
    for (Map.Entry<String, byte[]> e : notices.entrySet()) {
      if (store.setIfAbsent(e.getKey(), e.getValue())) {
        set.add(e.getKey());
      }
    }
    notices.clear();
    bytes = 0;
    return set;
  }
}
