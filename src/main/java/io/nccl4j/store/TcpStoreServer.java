package io.nccl4j.store;

import java.io.BufferedInputStream;
import java.io.BufferedOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.io.PushbackInputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.time.Duration;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BiConsumer;
import java.util.function.Predicate;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The server side of {@link TcpStore}, and a server for PyTorch's TCPStore clients: keys and queues ({@link
 * ServerStore}) behind a socket speaking PyTorch's wire in both its dialects ({@link Query}), every query PyTorch's
 * libuv server serves, one thread per client (a blocking WAIT, BARRIER or queue pop holds only its own client's
 * thread, and not the server's close). Hosted by rank 0 or standalone.
 *
 * <p>Every byte a connection sends is hostile until its handshake is done: a client has {@link
 * ListenerLimits#handshakeTimeout} to introduce itself, lengths are held to {@link ListenerLimits}' caps before
 * anything is allocated, and whatever a connection sends ends that connection only — the server keeps serving
 * the others. A server started for a job admits only that job's clients (docs/RENDEZVOUS.md).
 */
public final class TcpStoreServer implements AutoCloseable {
  private static final Logger LOG = LoggerFactory.getLogger(TcpStoreServer.class);

  private final ServerSocket server;
  private final ServerStore store = new ServerStore();
  private final Set<Socket> clients = ConcurrentHashMap.newKeySet();
  private final Thread acceptor;
  /**
   * Requests read and not yet answered, except while a get or wait blocks for its keys. close()
   * lets them finish, so that a client whose set was applied also hears so.
   */
  private final AtomicInteger answering = new AtomicInteger();
  /** Closes the server when the JVM exits, e.g. by System.exit in the rank that hosts it. */
  private final Thread exitHook;
  private volatile boolean closed;
  private final JobIdentity job;
  private final ListenerLimits limits;
  /** Whether clients that do not introduce themselves (PyTorch's) are admitted. */
  private final boolean admitPyTorch;
  /** The first stranger is logged at WARN, the others at DEBUG: a scan of the port must not flood the log. */
  private final AtomicBoolean warned = new AtomicBoolean();

  private TcpStoreServer(ServerSocket server, JobIdentity job, ListenerLimits limits, boolean admitPyTorch) {
    this.server = server;
    this.job = job;
    this.limits = limits;
    this.admitPyTorch = admitPyTorch;
    this.acceptor = new Thread(this::acceptLoop, "nccl4j-store-server:" + server.getLocalPort());
    this.acceptor.setDaemon(true);
    this.acceptor.start();
    this.exitHook = new Thread(this::drainAndClose, "nccl4j-store-server-exit:" + server.getLocalPort());
    Runtime.getRuntime().addShutdownHook(exitHook);
  }

  /**
   * Listens on {@code port} (0: any free port) on every interface, for any client (no job identity), PyTorch's
   * included: a standalone server.
   *
   * @throws IllegalStateException naming the port when it cannot be bound
   */
  public static TcpStoreServer start(int port) {
    return start(null, port, JobIdentity.anonymous(), ListenerLimits.fromEnvironment());
  }

  /**
   * Listens on {@code bind}:{@code port} (null: every interface; port 0: any free port) for the clients of
   * {@code job} only: a client that names another job is refused, and when the job has a token, a client must
   * answer a challenge with it. An anonymous {@code job} admits every client, PyTorch's included; a job's server
   * admits only nccl4j clients (see {@link #start(InetAddress, int, JobIdentity, ListenerLimits, boolean)}).
   *
   * @throws IllegalStateException naming the port when it cannot be bound, and saying so when another process
   *     (another job) holds it
   */
  public static TcpStoreServer start(InetAddress bind, int port, JobIdentity job, ListenerLimits limits) {
    return start(bind, port, job, limits, admitsPyTorchByDefault(job));
  }

  /** A store of no job admits PyTorch's clients unless told otherwise; a job's store admits only its own. */
  static boolean admitsPyTorchByDefault(JobIdentity job) {
    return job.id().isEmpty() && !job.hasToken();
  }

  /**
   * As {@link #start(InetAddress, int, JobIdentity, ListenerLimits)}, saying whether PyTorch's clients, which name
   * no job and cannot answer a challenge, are admitted. When they are, the store admits whoever reaches it (any
   * client may speak as PyTorch's does), even for a job with a token: what protects the store is then its bind
   * address and its network, while the token still guards every transport connection (docs/RENDEZVOUS.md).
   */
  public static TcpStoreServer start(InetAddress bind, int port, JobIdentity job, ListenerLimits limits,
      boolean admitPyTorch) {
    ServerSocket s = null;
    try {
      s = new ServerSocket();
      s.setReuseAddress(true);
      s.bind(new InetSocketAddress(bind, port), 1024);
      return new TcpStoreServer(s, job, limits, admitPyTorch);
    } catch (java.net.BindException e) {
      closeQuietly(s);
      throw new IllegalStateException("TCP store: cannot listen on port " + port + (bind == null ? "" : " of " + bind)
          + ": " + e.getMessage() + ": another process, perhaps another job, holds port " + port
          + "; give each job its own MASTER_PORT", e);
    } catch (IOException e) {
      closeQuietly(s);
      throw new IllegalStateException("TCP store: cannot listen on port " + port + ": " + e.getMessage(), e);
    }
  }

  private static void closeQuietly(ServerSocket s) {
    try {
      if (s != null) {
        s.close();
      }
    } catch (IOException e) {
      // failing anyway
    }
  }

  /** The address the server listens on (the wildcard address when it listens on every interface). */
  public InetAddress address() {
    return server.getInetAddress();
  }

  /**
   * From now on, calls {@code listener} with the key and the new value of every write of a key that {@code keys}
   * accepts — a set, append, add, multi-set, a compare-and-set that sets, a departure notice — in the order the
   * store applies them. Keys are as clients send them (nccl4j's and PyTorch's put {@code /} before a user's key).
   * The listener runs on the writing client's thread while the store is locked, before the client hears that its
   * write is done: it must return at once and must not call this store (a client of it included). For the host of
   * a job's store that is not one of the job's ranks (the launcher), which learns what the ranks leave there.
   */
  public void watch(Predicate<String> keys, BiConsumer<String, byte[]> listener) {
    store.watch(Objects.requireNonNull(keys, "keys"), Objects.requireNonNull(listener, "listener"));
  }

  /** The TCP port the server listens on: the one asked for, or the one chosen for port 0. */
  public int port() {
    return server.getLocalPort();
  }

  private void acceptLoop() {
    while (!closed) {
      try {
        Socket c = server.accept();
        if (closed) {
          // An accept blocked when close() ran may still return a connection: a closed server serves none.
          c.close();
          return;
        }
        c.setTcpNoDelay(true);
        clients.add(c);
        Thread t = new Thread(() -> serve(c), "nccl4j-store-client:" + c.getRemoteSocketAddress());
        t.setDaemon(true);
        t.start();
      } catch (IOException | RuntimeException | OutOfMemoryError e) {
        // Whatever one connection costs (no thread left for it), the loop goes on for the next.
        if (!closed) {
          LOG.warn("TCP store on port {}: accept failed: {}", port(), e.toString());
        }
      }
    }
  }

  private void serve(Socket c) {
    String peer = String.valueOf(c.getRemoteSocketAddress());
    try (c) {
      PushbackInputStream raw = new PushbackInputStream(new BufferedInputStream(c.getInputStream()), 8);
      StoreHandshake.Link link = new StoreHandshake.Link(c, new DataInputStream(raw),
          new DataOutputStream(new BufferedOutputStream(c.getOutputStream())));
      // A client that says nothing, or too little, must not hold a thread and a connection for ever.
      c.setSoTimeout((int) Math.min(Integer.MAX_VALUE, limits.handshakeTimeout().toMillis()));
      if (StoreHandshake.admit(job, admitPyTorch, port(), peer, link, raw, this::stranger) == null) {
        return;
      }
      c.setSoTimeout(0);
      new StoreConnection(store, link, limits, peer, answering).serve(() -> !closed);
    } catch (java.net.SocketTimeoutException e) {
      stranger("dropped {}: no handshake within {} ms", peer, limits.handshakeTimeout().toMillis());
    } catch (StoreConnection.Fatal e) {
      stranger("dropped a client: {}", e.getMessage());
    } catch (IOException | RuntimeException e) {
      // the client went away, or sent what no client of this store would: either way only it is dropped
      LOG.debug("TCP store on port {}: connection of {} ended: {}", port(), peer, e.toString());
    } finally {
      clients.remove(c);
    }
  }

  private void stranger(String format, Object... args) {
    String f = "TCP store on port {}: " + format;
    Object[] a = new Object[args.length + 1];
    a[0] = port();
    System.arraycopy(args, 0, a, 1, args.length);
    if (warned.compareAndSet(false, true)) {
      LOG.warn(f + " (further such connections are logged at DEBUG)", a);
    } else {
      LOG.debug(f, a);
    }
  }

  /**
   * Stops accepting, lets requests being answered finish (at most {@link #DRAIN}), closes every
   * client connection. Idempotent.
   */
  @Override
  public void close() {
    if (closed) {
      return;
    }
    try {
      Runtime.getRuntime().removeShutdownHook(exitHook);
    } catch (IllegalStateException exiting) {
      // the hook is running or about to
    }
    drainAndClose();
  }

  /** How long close() lets requests being answered finish. */
  static final Duration DRAIN = Duration.ofSeconds(2);

  private synchronized void drainAndClose() {
    if (closed) {
      return;
    }
    closed = true;
    try {
      server.close();
    } catch (IOException e) {
      // closing anyway
    }
    long until = System.nanoTime() + DRAIN.toNanos();
    while (answering.get() > 0 && System.nanoTime() - until < 0) {
      java.util.concurrent.locks.LockSupport.parkNanos(1_000_000);
    }
    for (Socket c : clients) {
      try {
        c.close();
      } catch (IOException e) {
        // closing anyway
      }
    }
    store.close();
  }

  /**
   * How many of its clients' WAITs, BARRIERs and blocking pops await {@code key} now: what a test that needs a
   * client blocked on the server before it acts waits for, in place of a sleep.
   */
  int pendingWaits(String key) {
    return store.pendingWaits(key);
  }

  /** How many requests the server has begun to read and not yet answered (a blocked get or wait aside). */
  int answering() {
    return answering.get();
  }

  /** How many client connections the server holds open (handshaking or served). */
  int connections() {
    return clients.size();
  }

  @Override
  public String toString() {
    return "TcpStoreServer(port " + port() + (closed ? ", closed" : "") + ")";
  }
}
