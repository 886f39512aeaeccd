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
 * libuv server does. A client that said HELLO (nccl4j's) gets a status byte before every answer, so that a refused
 * request (a field over its cap, ADD or BARRIER on a value that is not a number, a push to a full queue) reaches it
 * with the reason and its connection stays in step; PyTorch's wire has no errors, so a PyTorch client that sends
 * such a request is dropped, as its own server would drop it. Such a client may also leave departure notices
 * ({@link DepartureNotices}), which the connection applies when it ends.
 *
 * <p>Over 400 lines because it is the one table of the wire's query types, each case a few lines that read its fields
 * ({@link QueryFields}) and answer; the state they act on is {@link ServerStore}'s, the waits' rules
 * {@link PendingWaits}'s.
 */
final class StoreConnection {
  private static final Logger LOG = LoggerFactory.getLogger(StoreConnection.class);
  /** How often a WAIT looks at its client's socket for CANCEL_WAIT or a hang-up. */
  private static final long WAIT_SLICE_NANOS = 50_000_000L;

  private final ServerStore store;
  private final StoreHandshake.Link link;
  private final ListenerLimits limits;
  private final String peer;
  private final AtomicInteger answering;
  private final DataInputStream in;
  private final DataOutputStream out;
  /** The WAIT or BARRIER not yet answered, or null. */
  private PendingWaits.Wait pendingWait;
  private final QueryFields fields;
  /** What this client asked to have set when it leaves. */
  private final DepartureNotices notices;

  StoreConnection(ServerStore store, StoreHandshake.Link link, ListenerLimits limits, String peer,
      AtomicInteger answering) {
    this.store = store;
    this.link = link;
    this.limits = limits;
    this.peer = peer;
    this.answering = answering;
    this.in = link.in;
    this.out = link.out;
    this.fields = new QueryFields(link, limits, peer);
    this.notices = new DepartureNotices(limits, peer);
  }

  /** A query that cannot be answered, nor skipped: its client hears why (when it can) and is dropped. */
  static final class Fatal extends IOException {
    private static final long serialVersionUID = 1L;

    Fatal(String message) {
      super(message);
    }

    /** The end of {@code link}'s connection: an nccl4j client is told {@code why} first. */
    static Fatal told(StoreHandshake.Link link, String why) throws IOException {
      if (link.nccl4j) {
        link.out.writeByte(Wire.ERROR);
        Wire.writeMessage(link.out, why);
        link.out.flush();
      }
      return new Fatal(why);
    }
  }

  /**
   * Serves queries until the client leaves (an IOException) or {@code open} turns false. A WAIT whose keys are not
   * all set, or a BARRIER not yet complete, stays pending while the connection goes on, as in PyTorch's server:
   * STOP_WAITING is sent when the wait is released ({@link PendingWaits}), and CANCEL_WAIT ends it. Meanwhile the
   * socket is read in short slices, between which the wait is looked at.
   * However the connection ends — the client closed it, died, or sent what ends it — its pending wait is forgotten,
   * and its departure notices are applied, unless the server is closing (nobody is left to wait).
   */
  void serve(java.util.function.BooleanSupplier open) throws IOException {
    try {
      serveQueries(open);
    } finally {
      if (pendingWait != null) {
        // A client gone while it waited must not take a pushed item's wake-up from the next one waiting.
        store.cancel(pendingWait);
      }
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
          if (store.await(pendingWait, WAIT_SLICE_NANOS)) {
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
        fields.start();
        if (code == Wire.SET_ON_DEPARTURE && link.nccl4j) {
          registerDepartures();
        } else if (code == Wire.WITHDRAW_ON_DEPARTURE && link.nccl4j) {
          withdrawDepartures();
        } else {
          Query q = Query.of(link.dialect, code);
          if (q == null || q == Query.VALIDATE) {
            throw Fatal.told(link, "query type " + code + " is not one this store serves in the " + link.dialect
                + " dialect");
          }
          answer(q);
        }
        out.flush();
      } finally {
        answering.decrementAndGet();
      }
    }
  }

  /** Before an answer: nothing for PyTorch's clients, OK for nccl4j's, or the error that refused the query. */
  private boolean ok() throws IOException {
    String refused = fields.refused();
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
        String key = fields.key();
        byte[] value = fields.value();
        if (ok()) {
          store.set(key, value);
        }
        break;
      }
      case APPEND: {
        String key = fields.key();
        byte[] value = fields.value();
        if (ok()) {
          store.append(key, value);
        }
        break;
      }
      case COMPARE_SET: {
        String key = fields.key();
        byte[] expected = fields.value();
        byte[] desired = fields.value();
        if (ok()) {
          Wire.writeBytes(out, store.compareSet(key, expected, desired));
        }
        break;
      }
      case GET: {
        String key = fields.key();
        if (fields.refused() == null && store.getNow(key) == null && link.nccl4j) {
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
        String key = fields.key();
        long delta = Wire.readU64(in);
        if (fields.refused() != null) {
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
        List<String> keys = fields.keys();
        if (ok()) {
          out.writeByte(store.present(keys) ? Wire.READY : Wire.NOT_READY);
        }
        break;
      }
      case WAIT: {
        List<String> keys = fields.keys();
        if (ok()) {
          pend(store.startWait(keys));
        }
        break;
      }
      case CANCEL_WAIT:
        // Part of the WAIT it cancels: no status of its own, so that the client reads WAIT_CANCELED, or
        // STOP_WAITING then WAIT_CANCELED when the keys came first (also when they came since the loop last
        // looked). PyTorch's server answers so even when nothing waits.
        if (pendingWait != null && store.cancel(pendingWait)) {
          out.writeByte(Wire.STOP_WAITING);
        }
        pendingWait = null;
        out.writeByte(Wire.WAIT_CANCELED);
        break;
      case GETNUMKEYS:
        if (ok()) {
          Wire.writeU64(out, store.numKeys());
        }
        break;
      case DELETE_KEY: {
        String key = fields.key();
        if (ok()) {
          Wire.writeU64(out, store.deleteKey(key) ? 1 : 0);
        }
        break;
      }
      case MULTI_GET: {
        List<String> keys = fields.keys();
        if (fields.refused() == null && link.nccl4j) {
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
        long n = fields.count();
        List<String> keys = new ArrayList<>();
        List<byte[]> values = new ArrayList<>();
        for (long i = 0; i < n; i++) {
          keys.add(fields.key());
          values.add(fields.value());
        }
        if (ok()) {
          for (int i = 0; i < keys.size(); i++) {
            store.set(keys.get(i), values.get(i));
          }
        }
        break;
      }
      case QUEUE_PUSH: {
        String key = fields.key();
        byte[] item = fields.value();
        if (fields.refused() == null) {
          try {
            store.push(key, item, limits, peer);
          } catch (ServerStore.QueueFullException e) {
            error(e.getMessage());
            break;
          }
        }
        ok();
        break;
      }
      case QUEUE_POP: {
        String key = fields.key();
        if (ok()) {
          ServerStore.Popped p = store.pop(key);
          Wire.writeU64(out, p.length());
          if (p.item() != null) {
            Wire.writeBytes(out, p.item());
          }
        }
        break;
      }
      case QUEUE_LEN: {
        String key = fields.key();
        if (ok()) {
          Wire.writeU64(out, store.queueLen(key));
        }
        break;
      }
      case LIST_KEYS:
        if (ok()) {
          List<String> keys = store.listKeys();
          Wire.writeU64(out, keys.size());
          for (String k : keys) {
            Wire.writeString(out, k);
          }
        }
        break;
      case BARRIER: {
        String key = fields.key();
        long worldSize = Wire.readU64(in);
        if (fields.refused() != null) {
          ok();
          break;
        }
        PendingWaits.Wait w;
        try {
          w = store.barrier(key, worldSize);
        } catch (NumberFormatException e) {
          error("barrier(" + key + "): the value of '" + key + "' is not a number: " + e.getMessage());
          break;
        }
        ok();
        pend(w);
        break;
      }
      default:
        throw Fatal.told(link, "query " + q + " is not served");
    }
  }

  /** SET_ON_DEPARTURE: the pairs are read whole, then kept or refused whole. */
  private void registerDepartures() throws IOException {
    long n = fields.count();
    List<String> keys = new ArrayList<>();
    List<byte[]> values = new ArrayList<>();
    for (long i = 0; i < n; i++) {
      keys.add(fields.key());
      values.add(fields.value());
    }
    if (fields.refused() == null) {
      String why = notices.register(keys, values, store);
      if (why != null) {
        error(why);
        return;
      }
    }
    ok();
  }

  /** WITHDRAW_ON_DEPARTURE: the keys are read whole, then their notices dropped. */
  private void withdrawDepartures() throws IOException {
    List<String> keys = fields.keys();
    if (fields.refused() == null) {
      notices.withdraw(keys);
    }
    ok();
  }

  /** Answers a WAIT or BARRIER whose wait is {@code w}: at once when it is null, else when it is done. */
  private void pend(PendingWaits.Wait w) throws IOException {
    if (pendingWait != null) {
      // A legacy client goes on after a WAIT it gave up on: its new wait replaces the old, as before.
      store.cancel(pendingWait);
    }
    pendingWait = w;
    if (w == null) {
      out.writeByte(Wire.STOP_WAITING);
    }
  }
}
