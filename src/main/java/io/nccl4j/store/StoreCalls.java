package io.nccl4j.store;

import io.nccl4j.BackendException;
import io.nccl4j.internal.concurrent.Durations;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.net.SocketTimeoutException;
import java.nio.charset.StandardCharsets;
import java.security.SecureRandom;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

/**
 * The queries of one {@link TcpStore} connection, in the dialect its server speaks, as PyTorch's client sends them:
 * user keys prefixed with "/", a get is a WAIT then a GET, a wait that times out is cancelled with CANCEL_WAIT. The
 * legacy dialect has no CANCEL_WAIT, so there a wait polls CHECK instead (a timed-out WAIT would leave an answer in
 * the stream). Calls are sequential (synchronized); a connection that breaks fails every later call at once.
 */
final class StoreCalls {
  /**
   * The most a client waits for its server beyond a request's own wait: what a store of a long timeout allows a
   * slow network. A client waits {@link #margin} instead: this, or its store's timeout where that is shorter.
   */
  static final Duration NETWORK_MARGIN = Duration.ofSeconds(30);
  /** The least margin, whatever the timeout: a loaded machine's scheduling, not a frozen server. */
  static final Duration MIN_MARGIN = Duration.ofSeconds(2);
  /** PyTorch's client prefixes every user key with this, so that its internal keys ("init/") stay apart. */
  static final String KEY_PREFIX = "/";
  private static final SecureRandom RANDOM = new SecureRandom();

  private final StoreHandshake.Link link;
  private final String address;
  private final ListenerLimits limits;
  private boolean closed;
  /** Why the connection broke, once it has: later requests fail at once with it. */
  private String lost;

  /** How long past a request's own wait this client waits for the answer ({@link #margin}). */
  private final Duration margin;

  StoreCalls(StoreHandshake.Link link, String address, ListenerLimits limits, Duration timeout) {
    this.link = link;
    this.address = address;
    this.limits = limits;
    this.margin = margin(timeout);
  }

  /**
   * How long past a request's own wait a client of a store of {@code timeout} waits for the answer: the timeout, the
   * group's, between {@link #MIN_MARGIN} and {@link #NETWORK_MARGIN}. A frozen store host (stopped, or its JVM
   * paused) then fails a call within the group's timeout, as every other wait of the group does, not after a fixed
   * 30 s.
   */
  static Duration margin(Duration timeout) {
    if (timeout == null || timeout.compareTo(NETWORK_MARGIN) >= 0) {
      return NETWORK_MARGIN;
    }
    return timeout.compareTo(MIN_MARGIN) <= 0 ? MIN_MARGIN : timeout;
  }

  @FunctionalInterface
  private interface Body {
    void write(DataOutputStream out) throws IOException;
  }

  @FunctionalInterface
  private interface Answer<T> {
    T read(DataInputStream in) throws IOException;
  }

  private static String wireKey(String key) {
    return KEY_PREFIX + key;
  }

  /**
   * Sends one query and reads its answer, waiting up to {@code wait} plus the margin; an nccl4j server's status
   * byte comes first and carries its errors.
   */
  private <T> T call(Query q, String what, Duration wait, Body body, Answer<T> answer) {
    return call(q.code(link.dialect), what, wait, body, answer);
  }

  /** As {@link #call(Query, String, Duration, Body, Answer)}, by type byte: also nccl4j's own queries. */
  private synchronized <T> T call(byte code, String what, Duration wait, Body body, Answer<T> answer) {
    ensureUsable(what);
    try {
      link.out.writeByte(code);
      body.write(link.out);
      link.out.flush();
      link.socket.setSoTimeout(Durations.toIntMillis(Durations.plus(wait, margin)));
      checkStatus(what);
      return answer == null ? null : answer.read(link.in);
    } catch (SocketTimeoutException e) {
      lost = "no answer to " + what + " within " + Durations.describe(Durations.plus(wait, margin));
      throw new StoreTimeoutException("TCP store " + address + ": " + lost);
    } catch (IOException e) {
      throw broken(what, e);
    }
  }

  private void ensureUsable(String what) {
    if (closed) {
      throw new IllegalStateException("TCP store client of " + address + " is closed");
    }
    if (lost != null) {
      // The connection broke under an earlier request: every later one fails at once, for the same reason.
      throw new BackendException("TCP store " + address + ": connection failed earlier (" + lost + "), so " + what
          + " cannot be sent");
    }
  }

  private BackendException broken(String what, IOException e) {
    String why = e instanceof java.io.EOFException && e.getMessage() == null ? "the connection closed" : e.getMessage();
    lost = "the store's host closed or reset the connection during " + what + ": " + why
        + "; the process hosting the store (rank 0) may have exited";
    return new BackendException("TCP store " + address + ": connection failed during " + what + ": " + why
        + " (the process hosting the store, rank 0, may have exited)", e);
  }

  private byte[] value(DataInputStream in) throws IOException {
    return Wire.readBytes(in, limits.maxValueBytes(), "a value", "NCCL4J_STORE_MAX_VALUE_BYTES", address);
  }

  void set(String key, byte[] value) {
    call(Query.SET, "set(" + key + ")", Duration.ZERO, o -> {
      Wire.writeString(o, wireKey(key));
      Wire.writeBytes(o, value);
    }, null);
  }

  byte[] get(String key, Duration wait) {
    await(List.of(key), wait, "get(" + key + ")");
    return call(Query.GET, "get(" + key + ")", Duration.ZERO, o -> Wire.writeString(o, wireKey(key)), this::value);
  }

  long add(String key, long delta) {
    return call(Query.ADD, "add(" + key + ")", Duration.ZERO, o -> {
      Wire.writeString(o, wireKey(key));
      Wire.writeU64(o, delta);
    }, Wire::readU64);
  }

  byte[] compareSet(String key, byte[] expected, byte[] desired) {
    return call(Query.COMPARE_SET, "compareSet(" + key + ")", Duration.ZERO, o -> {
      Wire.writeString(o, wireKey(key));
      Wire.writeBytes(o, expected);
      Wire.writeBytes(o, desired);
    }, this::value);
  }

  boolean check(List<String> keys) {
    return call(Query.CHECK, "check(" + keys + ")", Duration.ZERO, o -> writeKeys(o, keys),
        in -> in.readByte() == Wire.READY);
  }

  boolean deleteKey(String key) {
    return call(Query.DELETE_KEY, "deleteKey(" + key + ")", Duration.ZERO, o -> Wire.writeString(o, wireKey(key)),
        Wire::readU64) > 0;
  }

  long numKeys() {
    return call(Query.GETNUMKEYS, "numKeys", Duration.ZERO, o -> { }, Wire::readU64);
  }

  void ping() {
    if (link.dialect == Query.Dialect.LEGACY) {
      check(List.of());
      return;
    }
    int nonce = RANDOM.nextInt();
    int echo = call(Query.PING, "ping", Duration.ZERO, o -> Wire.writeU32(o, nonce), Wire::readU32);
    if (echo != nonce) {
      throw new BackendException("TCP store " + address + " answered ping " + Integer.toHexString(nonce) + " with "
          + Integer.toHexString(echo));
    }
  }

  List<byte[]> multiGet(List<String> keys, Duration wait) {
    await(keys, wait, "multiGet(" + keys + ")");
    if (!Query.MULTI_GET.in(link.dialect)) {
      List<byte[]> values = new ArrayList<>(keys.size());
      for (String k : keys) {
        values.add(call(Query.GET, "get(" + k + ")", Duration.ZERO, o -> Wire.writeString(o, wireKey(k)),
            this::value));
      }
      return values;
    }
    return call(Query.MULTI_GET, "multiGet(" + keys + ")", Duration.ZERO, o -> writeKeys(o, keys), in -> {
      List<byte[]> values = new ArrayList<>(keys.size());
      for (int i = 0; i < keys.size(); i++) {
        values.add(value(in));
      }
      return values;
    });
  }

  void multiSet(List<String> keys, List<byte[]> values) {
    if (!Query.MULTI_SET.in(link.dialect)) {
      for (int i = 0; i < keys.size(); i++) {
        set(keys.get(i), values.get(i));
      }
      return;
    }
    call(Query.MULTI_SET, "multiSet(" + keys + ")", Duration.ZERO, o -> {
      Wire.writeU64(o, keys.size());
      for (int i = 0; i < keys.size(); i++) {
        Wire.writeString(o, wireKey(keys.get(i)));
        Wire.writeBytes(o, values.get(i));
      }
    }, null);
  }

  /** nccl4j's SET_ON_DEPARTURE, to an nccl4j server only (the caller checks). */
  void setOnDeparture(List<String> keys, List<byte[]> values) {
    call(Wire.SET_ON_DEPARTURE, "setOnDeparture(" + keys + ")", Duration.ZERO, o -> {
      Wire.writeU64(o, keys.size());
      for (int i = 0; i < keys.size(); i++) {
        Wire.writeString(o, wireKey(keys.get(i)));
        Wire.writeBytes(o, values.get(i));
      }
    }, null);
  }

  /** nccl4j's WITHDRAW_ON_DEPARTURE, to an nccl4j server only (the caller checks). */
  void withdrawOnDeparture(List<String> keys) {
    call(Wire.WITHDRAW_ON_DEPARTURE, "withdrawOnDeparture(" + keys + ")", Duration.ZERO, o -> {
      Wire.writeU64(o, keys.size());
      for (String k : keys) {
        Wire.writeString(o, wireKey(k));
      }
    }, null);
  }

  void queuePush(String key, byte[] item) {
    String what = "queuePush(" + key + ")";
    requireQueues(what);
    call(Query.QUEUE_PUSH, what, Duration.ZERO, o -> {
      Wire.writeString(o, wireKey(key));
      Wire.writeBytes(o, item);
    }, null);
  }

  /**
   * QUEUE_POP, after a WAIT of up to {@code wait} for the queue's key when {@code block}, as PyTorch's client pops
   * (its server takes a non-empty queue for a set key); null when the queue was empty.
   */
  byte[] queuePop(String key, boolean block, Duration wait) {
    String what = "queuePop(" + key + ")";
    requireQueues(what);
    if (block) {
      await(List.of(key), wait, what);
    }
    return call(Query.QUEUE_POP, what, Duration.ZERO, o -> Wire.writeString(o, wireKey(key)),
        in -> Wire.readU64(in) > 0 ? value(in) : null);
  }

  long queueLen(String key) {
    String what = "queueLen(" + key + ")";
    requireQueues(what);
    return call(Query.QUEUE_LEN, what, Duration.ZERO, o -> Wire.writeString(o, wireKey(key)), Wire::readU64);
  }

  private void requireQueues(String what) {
    if (!Query.QUEUE_PUSH.in(link.dialect)) {
      throw new UnsupportedOperationException("TCP store " + address + ": " + what + " cannot be sent: the server"
          + " speaks PyTorch's legacy dialect (torch 1.x), which has no queues");
    }
  }

  private static void writeKeys(DataOutputStream o, List<String> keys) throws IOException {
    Wire.writeU64(o, keys.size());
    for (String k : keys) {
      Wire.writeString(o, wireKey(k));
    }
  }

  /**
   * Waits until every key is set, up to {@code wait}: WAIT, and CANCEL_WAIT when the time is up (the server may have
   * sent STOP_WAITING meanwhile; then WAIT_CANCELED follows it, and the keys are there).
   */
  void await(List<String> keys, Duration wait) {
    await(keys, wait, "wait(" + keys + ")");
  }

  /** {@code what}: the call the wait is part of, as errors name it. */
  private synchronized void await(List<String> keys, Duration wait, String what) {
    if (link.dialect == Query.Dialect.LEGACY) {
      poll(keys, wait);
      return;
    }
    ensureUsable(what);
    try {
      link.out.writeByte(Query.WAIT.code(link.dialect));
      writeKeys(link.out, keys);
      link.out.flush();
      link.socket.setSoTimeout(Durations.toIntMillis(margin));
      checkStatus(what);
      link.socket.setSoTimeout(Durations.toIntMillis(wait));
      byte answer;
      try {
        answer = link.in.readByte();
      } catch (SocketTimeoutException timedOut) {
        link.socket.setSoTimeout(Durations.toIntMillis(margin));
        link.out.writeByte(Query.CANCEL_WAIT.code(link.dialect));
        link.out.flush();
        answer = link.in.readByte();
        if (answer == Wire.STOP_WAITING) {
          if (link.in.readByte() != Wire.WAIT_CANCELED) {
            throw new IOException("no WAIT_CANCELED after STOP_WAITING");
          }
          return;
        }
        if (answer != Wire.WAIT_CANCELED) {
          throw new IOException("answer " + answer + " to CANCEL_WAIT");
        }
        throw timedOut(keys, wait);
      }
      if (answer != Wire.STOP_WAITING) {
        throw new IOException("answer " + answer + " to WAIT");
      }
    } catch (SocketTimeoutException e) {
      lost = "no answer to CANCEL_WAIT within " + Durations.describe(margin);
      throw new StoreTimeoutException("TCP store " + address + ": " + lost);
    } catch (IOException e) {
      throw broken(what, e);
    }
  }

  /** An nccl4j server's status before an answer: an error is thrown; PyTorch's servers send none. */
  private void checkStatus(String what) throws IOException {
    if (link.nccl4j && link.in.readByte() == Wire.ERROR) {
      throw new BackendException("TCP store " + address + " failed " + what + ": " + Wire.readMessage(link.in,
          address));
    }
  }

  /** The legacy dialect's wait: CHECK, backing off from 10 ms to 200 ms, until the keys are there or the time is. */
  private void poll(List<String> keys, Duration wait) {
    long deadline = Durations.deadlineFromNow(wait);
    long pause = 10;
    while (!check(keys)) {
      long left = (deadline - System.nanoTime()) / 1_000_000;
      if (left <= 0) {
        throw timedOut(keys, wait);
      }
      try {
        Thread.sleep(Math.min(pause, left));
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new StoreTimeoutException("TCP store " + address + ": interrupted while waiting for keys " + keys);
      }
      pause = Math.min(200, pause * 2);
    }
  }

  private StoreTimeoutException timedOut(List<String> keys, Duration wait) {
    List<String> missing = new ArrayList<>();
    for (String k : keys) {
      if (!check(List.of(k))) {
        missing.add(k);
      }
    }
    return new StoreTimeoutException("TCP store " + address + ": timed out after " + Durations.describe(wait)
        + " waiting for keys " + keys + " (missing: " + missing + ")");
  }

  synchronized void close() {
    closed = true;
    link.close();
  }

  /** Bytes of {@code key} as UTF-8 on the wire (with its prefix), for the client's own cap checks. */
  static int wireKeyBytes(String key) {
    return wireKey(key).getBytes(StandardCharsets.UTF_8).length;
  }
}
