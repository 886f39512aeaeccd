package io.nccl4j.store;

import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.net.SocketTimeoutException;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One admitted client of a {@link TcpStoreServer}: reads its queries in its dialect and answers them as PyTorch's
 * server does. A client that said HELLO (nccl4j's) gets a status byte before every answer, so that a refused
 * request (a field over its cap, ADD to a value that is not a number) reaches it with the reason and its connection
 * stays in step; PyTorch's wire has no errors, so a PyTorch client that sends such a request is dropped, as its own
 * server would drop it. Such a client may also leave departure notices ({@link DepartureNotices}), which the
 * connection applies when it ends.
 */
final class StoreConnection {
  private static final Logger LOG = LoggerFactory.getLogger(StoreConnection.class);
  /** How often a WAIT looks at its client's socket for CANCEL_WAIT or a hang-up. */
  private static final long WAIT_SLICE_NANOS = 50_000_000L;

  private final HashStore store;
  private final StoreHandshake.Link link;
  private final ListenerLimits limits;
  private final String peer;
  private final AtomicInteger answering;
  private final DataInputStream in;
  private final DataOutputStream out;
  /** Bytes the fields of the query being read may still take (a query of many fields has one cap). */
  private long budget;
  /** The keys of a WAIT not yet answered, or null. */
  private List<String> pendingWait;
  /** The first field of this query that was over its cap (and skipped), or null. */
  private String refused;
  /** What this client asked to have set when it leaves. */
  private final DepartureNotices notices;

  StoreConnection(HashStore store, StoreHandshake.Link link, ListenerLimits limits, String peer,
      AtomicInteger answering) {
    this.store = store;
    this.link = link;
    this.limits = limits;
    this.peer = peer;
    this.answering = answering;
    this.in = link.in;
    this.out = link.out;
    this.notices = new DepartureNotices(limits, peer);
  }

  /** A query that cannot be answered, nor skipped: its client hears why (when it can) and is dropped. */
  static final class Fatal extends IOException {
    private static final long serialVersionUID = 1L;

    Fatal(String message) {
      super(message);
    }
  }

  /**
   * Serves queries until the client leaves (an IOException) or {@code open} turns false. A WAIT whose keys are not
   * all set stays pending while the connection goes on, as in PyTorch's server: STOP_WAITING is sent when they are,
   * and CANCEL_WAIT ends it. Meanwhile the socket is read in short slices, between which the keys are looked at.
   * However the connection ends — the client closed it, died, or sent what ends it — its departure notices are
   * applied then, unless the server is closing (nobody is left to wait).
   */
  void serve(java.util.function.BooleanSupplier open) throws IOException {
    try {
      serveQueries(open);
    } finally {
      if (open.getAsBoolean()) {
        depart();
      }
    }
  }

  private void depart() {
    try {
      List<String> set = notices.apply(store);
      if (!set.isEmpty()) {
        LOG.debug("TCP store: the connection of {} ended; its departure notices set {}", peer, set);
      }
    } catch (IllegalStateException closing) {
      // the server closed its store meanwhile
    }
  }

  private void serveQueries(java.util.function.BooleanSupplier open) throws IOException {
    while (open.getAsBoolean()) {
      int code;
      if (pendingWait != null) {
        try {
          if (store.awaitKeys(pendingWait, WAIT_SLICE_NANOS)) {
            pendingWait = null;
            out.writeByte(Wire.STOP_WAITING);
            out.flush();
            continue;
          }
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
          throw new IOException("interrupted while " + peer + " waited for " + pendingWait);
        } catch (IllegalStateException closed) {
          throw new IOException("the store closed while " + peer + " waited for " + pendingWait);
        }
        link.socket.setSoTimeout(1);
        try {
          code = in.read();
        } catch (SocketTimeoutException nothingYet) {
          continue;
        } finally {
          link.socket.setSoTimeout(0);
        }
      } else {
        code = in.read();
      }
      if (code < 0) {
        return;
      }
      answering.incrementAndGet();
      try {
        budget = limits.maxFrameBytes();
        refused = null;
        if (code == Wire.SET_ON_DEPARTURE && link.nccl4j) {
          registerDepartures();
        } else {
          Query q = Query.of(link.dialect, code);
          if (q == null || q == Query.VALIDATE) {
            throw fatal("query type " + code + " is not one this store serves in the " + link.dialect + " dialect");
          }
          answer(q);
        }
        out.flush();
      } finally {
        answering.decrementAndGet();
      }
    }
  }

  private Fatal fatal(String why) throws IOException {
    if (link.nccl4j) {
      out.writeByte(Wire.ERROR);
      Wire.writeMessage(out, why);
      out.flush();
    }
    return new Fatal(why);
  }

  /** Before an answer: nothing for PyTorch's clients, OK for nccl4j's, or the error that refused the query. */
  private boolean ok() throws IOException {
    if (refused != null) {
      if (!link.nccl4j) {
        throw new Fatal(refused);
      }
      out.writeByte(Wire.ERROR);
      Wire.writeMessage(out, refused);
      return false;
    }
    if (link.nccl4j) {
      out.writeByte(Wire.OK);
    }
    return true;
  }

  private void error(String why) throws IOException {
    if (!link.nccl4j) {
      throw new Fatal(why);
    }
    out.writeByte(Wire.ERROR);
    Wire.writeMessage(out, why);
  }

  private void answer(Query q) throws IOException {
    switch (q) {
      case PING: {
        int nonce = Wire.readU32(in);
        if (ok()) {
          Wire.writeU32(out, nonce);
        }
        break;
      }
      case SET: {
        String key = key();
        byte[] value = value();
        if (ok()) {
          store.set(key, value);
        }
        break;
      }
      case APPEND: {
        String key = key();
        byte[] value = value();
        if (ok()) {
          store.append(key, value);
        }
        break;
      }
      case COMPARE_SET: {
        String key = key();
        byte[] expected = value();
        byte[] desired = value();
        if (ok()) {
          Wire.writeBytes(out, store.compareSet(key, expected, desired));
        }
        break;
      }
      case GET: {
        String key = key();
        if (refused == null && store.getNow(key) == null && link.nccl4j) {
          error("key '" + key + "' is not set");
          break;
        }
        if (ok()) {
          // PyTorch's clients wait before they get; a key deleted in between reads as empty, as in PyTorch's libuv
          // server.
          byte[] v = store.getNow(key);
          Wire.writeBytes(out, v == null ? new byte[0] : v);
        }
        break;
      }
      case ADD: {
        String key = key();
        long delta = Wire.readU64(in);
        if (refused != null) {
          ok();
          break;
        }
        long v;
        try {
          v = store.add(key, delta);
        } catch (NumberFormatException e) {
          error("add(" + key + "): the value of '" + key + "' is not a number: " + e.getMessage());
          break;
        }
        ok();
        Wire.writeU64(out, v);
        break;
      }
      case CHECK: {
        List<String> keys = keys();
        if (ok()) {
          out.writeByte(store.check(keys) ? Wire.READY : Wire.NOT_READY);
        }
        break;
      }
      case WAIT: {
        List<String> keys = keys();
        if (ok()) {
          if (store.check(keys)) {
            out.writeByte(Wire.STOP_WAITING);
          } else {
            pendingWait = keys;
          }
        }
        break;
      }
      case CANCEL_WAIT:
        // Part of the WAIT it cancels: no status of its own, so that the client reads WAIT_CANCELED, or
        // STOP_WAITING then WAIT_CANCELED when the keys came first. PyTorch's server answers so even when nothing
        // waits.
        pendingWait = null;
        out.writeByte(Wire.WAIT_CANCELED);
        break;
      case GETNUMKEYS:
        if (ok()) {
          Wire.writeU64(out, store.numKeys());
        }
        break;
      case DELETE_KEY: {
        String key = key();
        if (ok()) {
          Wire.writeU64(out, store.deleteKey(key) ? 1 : 0);
        }
        break;
      }
      case MULTI_GET: {
        List<String> keys = keys();
        if (refused == null && link.nccl4j) {
          List<String> missing = keys.stream().filter(k -> store.getNow(k) == null).toList();
          if (!missing.isEmpty()) {
            error("keys " + missing + " are not set");
            break;
          }
        }
        if (ok()) {
          for (String k : keys) {
            byte[] v = store.getNow(k);
            Wire.writeBytes(out, v == null ? new byte[0] : v);
          }
        }
        break;
      }
      case MULTI_SET: {
        long n = count();
        List<String> keys = new ArrayList<>();
        List<byte[]> values = new ArrayList<>();
        for (long i = 0; i < n; i++) {
          keys.add(key());
          values.add(value());
        }
        if (ok()) {
          for (int i = 0; i < keys.size(); i++) {
            store.set(keys.get(i), values.get(i));
          }
        }
        break;
      }
      default:
        throw fatal("query " + q + " is not served");
    }
  }

  /** SET_ON_DEPARTURE: the pairs are read whole, then kept or refused whole. */
  private void registerDepartures() throws IOException {
    long n = count();
    List<String> keys = new ArrayList<>();
    List<byte[]> values = new ArrayList<>();
    for (long i = 0; i < n; i++) {
      keys.add(key());
      values.add(value());
    }
    if (refused == null) {
      String why = notices.register(keys, values, store);
      if (why != null) {
        error(why);
        return;
      }
    }
    ok();
  }

  private long count() throws IOException {
    long n = Wire.readU64(in);
    if (n < 0 || n > limits.maxKeyBytes()) {
      throw fatal(new Wire.LimitException("a count", n, limits.maxKeyBytes(), "keys", "NCCL4J_STORE_MAX_KEY_BYTES",
          peer).getMessage());
    }
    return n;
  }

  private List<String> keys() throws IOException {
    long n = count();
    // Grown as keys arrive: a count is a claim, not a size to allocate.
    List<String> keys = new ArrayList<>();
    for (long i = 0; i < n; i++) {
      keys.add(key());
    }
    return keys;
  }

  private String key() throws IOException {
    byte[] b = field(limits.maxKeyBytes(), "a key", "NCCL4J_STORE_MAX_KEY_BYTES");
    return b == null ? null : new String(b, java.nio.charset.StandardCharsets.UTF_8);
  }

  private byte[] value() throws IOException {
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
      throw fatal(why);
    }
    Wire.skip(in, n);
    budget -= n;
    if (refused == null) {
      refused = why;
    }
    return null;
  }
}
