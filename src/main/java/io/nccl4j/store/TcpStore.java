package io.nccl4j.store;

import io.nccl4j.BackendException;
import io.nccl4j.internal.concurrent.Durations;
import java.io.BufferedInputStream;
import java.io.BufferedOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.time.Duration;
import java.util.List;
import java.util.NoSuchElementException;
import java.util.Objects;

/**
 * A {@link Store} reached over TCP, speaking PyTorch's TCPStore wire: a client of a {@link TcpStoreServer}, which
 * rank 0 hosts ({@link #hostAndConnect}) or which runs standalone, or of PyTorch's own TCPStore, current (torch 2.x,
 * torchrun's agent store) or legacy (torch 1.x); the handshake tells which ({@code StoreHandshake}). Requests are
 * sequential per client and thread-safe. Connecting retries with exponential backoff until the timeout; every
 * blocking call has a timeout; errors name the address, the keys and how long it waited.
 */
public final class TcpStore implements Store {
  private final String host;
  private final int port;
  private final Duration timeout;
  private final StoreHandshake.Link link;
  private final TcpStoreServer server;
  private boolean closed;
  private final ListenerLimits limits = ListenerLimits.fromEnvironment();
  private final StoreCalls calls;

  private TcpStore(String host, int port, Duration timeout, StoreHandshake.Link link, TcpStoreServer server) {
    this.host = host;
    this.port = port;
    this.timeout = timeout;
    this.link = link;
    this.server = server;
    this.calls = new StoreCalls(link, host + ":" + port, limits, timeout);
  }

  /**
   * Connects to the server at {@code host:port}, retrying with exponential backoff (50 ms … 2 s)
   * until {@code timeout}, as a client of no job (a server of a job refuses it).
   *
   * @throws StoreTimeoutException naming the address and the wait when no server answers in time
   */
  public static TcpStore connect(String host, int port, Duration timeout) {
    return connect(host, port, timeout, JobIdentity.anonymous(), null);
  }

  /**
   * Connects as a member of {@code job}. Nothing listening is retried until {@code timeout} (the store's host
   * may still be starting); what cannot get better fails at once: a host name that does not resolve, a store of
   * another job; a listener that answers but is not a store fails after {@link #NOT_A_STORE_GRACE}.
   *
   * @throws StoreTimeoutException naming the address and the wait when no server answers in time
   * @throws BackendException naming the address when the host does not resolve, the listener is not an nccl4j
   *     store, or the store belongs to another job
   */
  public static TcpStore connect(String host, int port, Duration timeout, JobIdentity job) {
    return connect(host, port, timeout, job, null);
  }

  /** Starts a server on {@code port} (0: any free port) and connects to it: what rank 0 does. */
  public static TcpStore hostAndConnect(int port, Duration timeout) {
    return hostAndConnect(null, port, timeout, JobIdentity.anonymous());
  }

  /**
   * Starts a server of {@code job} on {@code bind}:{@code port} (null: every interface) and connects to it: what
   * rank 0 of a job does.
   */
  public static TcpStore hostAndConnect(InetAddress bind, int port, Duration timeout, JobIdentity job) {
    return hostAndConnect(bind, port, timeout, job, TcpStoreServer.admitsPyTorchByDefault(job));
  }

  /**
   * As {@link #hostAndConnect(InetAddress, int, Duration, JobIdentity)}, saying whether the server admits PyTorch's
   * clients ({@link TcpStoreServer#start(InetAddress, int, JobIdentity, ListenerLimits, boolean)}).
   */
  public static TcpStore hostAndConnect(InetAddress bind, int port, Duration timeout, JobIdentity job,
      boolean admitPyTorch) {
    TcpStoreServer server = TcpStoreServer.start(bind, port, job, ListenerLimits.fromEnvironment(), admitPyTorch);
    try {
      String self = bind == null || bind.isAnyLocalAddress() ? "127.0.0.1" : bind.getHostAddress();
      return connect(self, server.port(), timeout, job, server);
    } catch (RuntimeException e) {
      server.close();
      throw e;
    }
  }

  /**
   * How long a listener that answers but not as a store is retried before the client gives up on it: long
   * enough for a store restarting on the port, far below any timeout.
   */
  static final Duration NOT_A_STORE_GRACE = Duration.ofSeconds(2);

  /**
   * How long the handshake waits for each answer of a listener: a store answers its probe at once (a busy machine
   * delays it by milliseconds), so a listener silent this long is not one — something accepted the connection and
   * says nothing (another program on MASTER_PORT, a proxy with nothing behind it). Twice in a row ends the connect
   * ({@link #NOT_A_STORE_GRACE}), within a few seconds rather than at the group's timeout.
   */
  static final Duration ANSWER_TIMEOUT = Duration.ofSeconds(2);

  private static TcpStore connect(String host, int port, Duration timeout, JobIdentity job, TcpStoreServer server) {
    Objects.requireNonNull(host, "host");
    InetSocketAddress address = new InetSocketAddress(host, port);
    if (address.isUnresolved()) {
      // A name that does not resolve now will not while the job waits: say so at once.
      throw new BackendException("TCP store: cannot resolve the store's host '" + host + "' (MASTER_ADDR): no such"
          + " host");
    }
    long started = System.nanoTime();
    long deadline = Durations.deadline(started, timeout);
    long backoff = 50;
    IOException last = null;
    long notAStoreSince = 0;
    int attempts = 0;
    while (true) {
      attempts++;
      try {
        StoreHandshake.Link link = StoreHandshake.join(() -> open(address, port, deadline), host, port, job);
        link.socket.setSoTimeout(0);
        return new TcpStore(host, port, timeout, link, server);
      } catch (IOException e) {
        // Keep the most informative error: a timeout of the last, shortest attempt says less than
        // what an earlier attempt learned (refused, not a store, ...).
        if (last == null || !timedOut(e) || timedOut(last)) {
          last = e;
        }
        if (e instanceof StoreHandshake.NotAStore) {
          notAStoreSince = notAStoreSince == 0 ? System.nanoTime() : notAStoreSince;
          long since = System.nanoTime() - notAStoreSince;
          if (since >= NOT_A_STORE_GRACE.toNanos() && deadline - System.nanoTime() > 0) {
            throw new BackendException("TCP store: gave up on " + host + ":" + port + " after "
                + (System.nanoTime() - started) / 1_000_000 + " ms (" + attempts + " attempts): " + e.getMessage()
                + "; is MASTER_PORT another program's port?");
          }
        }
      }
      long left = deadline - System.nanoTime();
      long pause = Math.min(backoff, left / 1_000_000);
      if (pause <= 0) {
        throw new StoreTimeoutException("TCP store: could not connect to " + host + ":" + port + " within "
            + Durations.describe(timeout) + " (" + attempts + " attempts; last error: " + describe(last) + ")");
      }
      sleep(pause);
      backoff = Math.min(2000, backoff * 2);
    }
  }

  /** An attempt that ran out of time (a read, or a silent listener): what it says is less than another error. */
  private static boolean timedOut(IOException e) {
    return e instanceof SocketTimeoutException || e instanceof StoreHandshake.Silent;
  }

  /** One connection of the handshake, which reads until the connect deadline. */
  private static StoreHandshake.Link open(InetSocketAddress address, int port, long deadline) throws IOException {
    Socket s = new Socket();
    try {
      long left = Math.max(1, (deadline - System.nanoTime()) / 1_000_000);
      try {
        s.connect(address, (int) Math.min(left, 10_000));
      } catch (SocketTimeoutException e) {
        // Told apart from a read's timeout, which means a silent listener (the handshake).
        throw new StoreHandshake.ConnectTimedOut("no answer to the connection request within "
            + Math.min(left, 10_000) + " ms");
      }
      if (s.getLocalSocketAddress().equals(s.getRemoteSocketAddress())) {
        // A port of this machine that nothing listens on may be picked as the source port too: the socket is
        // then connected to itself (TCP's simultaneous open) and would hear its own handshake as a store's.
        throw new java.net.ConnectException("Connection refused (connected to itself: nothing listens on port "
            + port + ")");
      }
      s.setTcpNoDelay(true);
      s.setKeepAlive(true);
      tuneKeepAlive(s);
      s.setSoTimeout(Durations.clampIntMillis(Math.max(1, Math.min(ANSWER_TIMEOUT.toMillis(),
          (deadline - System.nanoTime()) / 1_000_000))));
      return new StoreHandshake.Link(s, new DataInputStream(new BufferedInputStream(s.getInputStream())),
          new DataOutputStream(new BufferedOutputStream(s.getOutputStream())));
    } catch (IOException | RuntimeException e) {
      s.close();
      throw e;
    }
  }

  /**
   * A store host that vanishes (powered off, cut off) sends no reset: with the system's keepalive defaults
   * (two hours) a blocked get would wait out its own timeout. Probing an idle connection after 5 s, every 2 s,
   * 3 times, ends it within about 11 s. Where the platform lacks the options, or the Java runtime lacks the
   * jdk.net module that has them (a jlink'd runtime: NoClassDefFoundError), the defaults stay.
   */
  static void tuneKeepAlive(Socket s) {
    try {
      s.setOption(jdk.net.ExtendedSocketOptions.TCP_KEEPIDLE, 5);
      s.setOption(jdk.net.ExtendedSocketOptions.TCP_KEEPINTERVAL, 2);
      s.setOption(jdk.net.ExtendedSocketOptions.TCP_KEEPCOUNT, 3);
    } catch (UnsupportedOperationException | IOException | LinkageError e) {
      // the system's keepalive it is
    }
  }

  private static String describe(IOException e) {
    return e.getMessage() != null ? e.getMessage() : e.getClass().getSimpleName();
  }

  private static void sleep(long ms) {
    try {
      Thread.sleep(ms);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new StoreTimeoutException("TCP store: interrupted while connecting");
    }
  }

  /** The server this client hosts, or null. */
  public TcpStoreServer server() {
    return server;
  }

  /** A value the server would refuse is refused here, before it is sent, with the cap's name. */
  private void checkSize(String what, String key, long bytes, long cap, String setting) {
    if (bytes > cap) {
      throw new IllegalArgumentException("TCP store " + host + ":" + port + ": " + what + " of " + bytes
          + " bytes for key '" + (key.length() > 80 ? key.substring(0, 80) + "…" : key) + "' exceeds the cap of "
          + cap + " bytes (" + setting + ")");
    }
  }

  private void checkKey(String key) {
    checkSize("a key", key, StoreCalls.wireKeyBytes(key), limits.maxKeyBytes(), "NCCL4J_STORE_MAX_KEY_BYTES");
  }

  private void checkValue(String key, byte[] value) {
    checkSize("a value", key, value.length, limits.maxValueBytes(), "NCCL4J_STORE_MAX_VALUE_BYTES");
  }

  @Override
  public void set(String key, byte[] value) {
    checkKey(key);
    checkValue(key, value);
    calls.set(key, value);
  }

  @Override
  public byte[] get(String key, Duration wait) {
    checkKey(key);
    return calls.get(key, wait);
  }

  @Override
  public long add(String key, long delta) {
    return calls.add(key, delta);
  }

  @Override
  public byte[] compareSet(String key, byte[] expected, byte[] desired) {
    checkKey(key);
    checkValue(key, expected);
    checkValue(key, desired);
    return calls.compareSet(key, expected, desired);
  }

  @Override
  public void wait(List<String> keys, Duration wait) {
    calls.await(keys, wait);
  }

  @Override
  public boolean check(List<String> keys) {
    return calls.check(keys);
  }

  @Override
  public boolean deleteKey(String key) {
    return calls.deleteKey(key);
  }

  @Override
  public long numKeys() {
    return calls.numKeys();
  }

  /** One WAIT for every key, then one MULTI_GET (per-key GETs in the legacy dialect, which has none). */
  @Override
  public List<byte[]> multiGet(List<String> keys, Duration wait) {
    keys.forEach(this::checkKey);
    return calls.multiGet(keys, wait);
  }

  /** One MULTI_SET (per-key SETs in the legacy dialect, which has none). */
  @Override
  public void multiSet(List<String> keys, List<byte[]> values) {
    Store.checkPairs(keys, values);
    for (int i = 0; i < keys.size(); i++) {
      checkKey(keys.get(i));
      checkValue(keys.get(i), values.get(i));
    }
    calls.multiSet(keys, values);
  }

  /**
   * One SET_ON_DEPARTURE when the server is nccl4j's; against PyTorch's servers, which do not know the query and
   * would drop the connection, nothing is sent and the answer is false.
   */
  @Override
  public boolean setOnDeparture(List<String> keys, List<byte[]> values) {
    Store.checkPairs("setOnDeparture", keys, values);
    if (!link.nccl4j) {
      return false;
    }
    for (int i = 0; i < keys.size(); i++) {
      checkKey(keys.get(i));
      checkValue(keys.get(i), values.get(i));
    }
    calls.setOnDeparture(keys, values);
    return true;
  }

  /** One WITHDRAW_ON_DEPARTURE when the server is nccl4j's; against PyTorch's, nothing is sent (it holds none). */
  @Override
  public boolean withdrawOnDeparture(List<String> keys) {
    if (!link.nccl4j) {
      return false;
    }
    keys.forEach(this::checkKey);
    calls.withdrawOnDeparture(keys);
    return true;
  }

  /**
   * Appends {@code item} to the queue {@code key} (PyTorch's queue_push). A queue is not a key: {@link #get} and
   * {@link #numKeys} do not see it, while {@link #check} and {@link #wait} take a non-empty queue for a set key.
   * nccl4j's server and PyTorch's libuv one serve queues; PyTorch's classic one (useLibUV false) drops the
   * connection that sends one, so that the call after this one fails (docs/RENDEZVOUS.md).
   *
   * @throws UnsupportedOperationException against a server of the legacy dialect (torch 1.x), which has no queues
   * @throws BackendException naming the queue, the cap and its setting when nccl4j's server refuses the item
   */
  public void queuePush(String key, byte[] item) {
    checkKey(key);
    checkValue(key, item);
    calls.queuePush(key, item);
  }

  /**
   * Takes the first item of the queue {@code key} (PyTorch's queue_pop). With {@code block}, first waits up to
   * {@link #timeout()} for the queue to have one, as PyTorch's client does; one item wakes one waiting client.
   *
   * @throws NoSuchElementException when the queue is empty: without {@code block}, or when another client took
   *     the item first
   * @throws StoreTimeoutException with {@code block}, when no item came in time
   * @throws UnsupportedOperationException against a server of the legacy dialect
   */
  public byte[] queuePop(String key, boolean block) {
    checkKey(key);
    byte[] item = calls.queuePop(key, block, timeout);
    if (item == null) {
      throw new NoSuchElementException("TCP store " + host + ":" + port + ": queue '" + key + "' is empty");
    }
    return item;
  }

  /**
   * The number of items in the queue {@code key} (PyTorch's queue_len): 0 for a queue never pushed to.
   *
   * @throws UnsupportedOperationException against a server of the legacy dialect
   */
  public long queueLen(String key) {
    checkKey(key);
    return calls.queueLen(key);
  }

  /** Round trip to the server; throws when it does not answer. */
  public void ping() {
    calls.ping();
  }

  /** True when the server is PyTorch's (it cannot check a job), false when it is nccl4j's. */
  public boolean pyTorchServer() {
    return !link.nccl4j;
  }

  @Override
  public Duration timeout() {
    return timeout;
  }

  /** Closes the connection, and the server when this client hosts it. Idempotent. */
  @Override
  public synchronized void close() {
    if (closed) {
      return;
    }
    closed = true;
    calls.close();
    if (server != null) {
      server.close();
    }
  }

  @Override
  public String toString() {
    return "TcpStore(" + host + ":" + port + (server != null ? ", hosting" : "")
        + (link.nccl4j ? "" : ", PyTorch's " + link.dialect.toString().toLowerCase(java.util.Locale.ROOT) + " dialect")
        + ")";
  }
}
