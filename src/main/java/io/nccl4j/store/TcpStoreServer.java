package io.nccl4j.store;

import java.io.BufferedInputStream;
import java.io.BufferedOutputStream;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.SocketException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The server side of {@link TcpStore}: a {@link HashStore} behind a socket, one thread per client
 * (a blocking GET holds only its own client's thread). Hosted by rank 0 or standalone.
 *
 * <p>Every byte a connection sends is hostile until its handshake is done: a client has {@link
 * ListenerLimits#handshakeTimeout} to introduce itself, lengths are held to {@link ListenerLimits}' caps before
 * anything is allocated, and whatever a connection sends ends that connection only — the server keeps serving
 * the others. A server started for a job admits only that job's clients (docs/RENDEZVOUS.md).
 */
public final class TcpStoreServer implements AutoCloseable {
  private static final Logger LOG = LoggerFactory.getLogger(TcpStoreServer.class);

  private final ServerSocket server;
  private final HashStore store = new HashStore(Duration.ofDays(365));
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
  /** The first stranger is logged at WARN, the others at DEBUG: a scan of the port must not flood the log. */
  private final AtomicBoolean warned = new AtomicBoolean();

  private TcpStoreServer(ServerSocket server, JobIdentity job, ListenerLimits limits) {
    this.server = server;
    this.job = job;
    this.limits = limits;
    this.acceptor = new Thread(this::acceptLoop, "nccl4j-store-server:" + server.getLocalPort());
    this.acceptor.setDaemon(true);
    this.acceptor.start();
    this.exitHook = new Thread(this::drainAndClose, "nccl4j-store-server-exit:" + server.getLocalPort());
    Runtime.getRuntime().addShutdownHook(exitHook);
  }

  /**
   * Listens on {@code port} (0: any free port) on every interface, for any client (no job identity): a
   * standalone server.
   *
   * @throws IllegalStateException naming the port when it cannot be bound
   */
  public static TcpStoreServer start(int port) {
    return start(null, port, JobIdentity.anonymous(), ListenerLimits.fromEnvironment());
  }

  /**
   * Listens on {@code bind}:{@code port} (null: every interface; port 0: any free port) for the clients of
   * {@code job} only: a client that names another job is refused, and when the job has a token, a client must
   * answer a challenge with it. An anonymous {@code job} admits every client.
   *
   * @throws IllegalStateException naming the port when it cannot be bound, and saying so when another process
   *     (another job) holds it
   */
  public static TcpStoreServer start(InetAddress bind, int port, JobIdentity job, ListenerLimits limits) {
    ServerSocket s = null;
    try {
      s = new ServerSocket();
      s.setReuseAddress(true);
      s.bind(new InetSocketAddress(bind, port), 1024);
      return new TcpStoreServer(s, job, limits);
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
    try (c;
         DataInputStream in = new DataInputStream(new BufferedInputStream(c.getInputStream()));
         DataOutputStream out = new DataOutputStream(new BufferedOutputStream(c.getOutputStream()))) {
      // A client that says nothing, or too little, must not hold a thread and a connection for ever.
      c.setSoTimeout((int) Math.min(Integer.MAX_VALUE, limits.handshakeTimeout().toMillis()));
      if (!StoreHandshake.admit(job, port(), peer, in, out, this::stranger)) {
        return;
      }
      c.setSoTimeout(0);
      while (!closed) {
        byte[] request;
        try {
          request = Wire.readFrame(in, limits.maxFrameBytes(), "NCCL4J_STORE_MAX_VALUE_BYTES", peer);
        } catch (Wire.LimitException e) {
          stranger("dropped a client: {}", e.getMessage());
          tellAndDrop(c, e.getMessage());
          return;
        }
        answering.incrementAndGet();
        try {
          Wire.writeFrame(out, handle(request, peer));
        } finally {
          answering.decrementAndGet();
        }
      }
    } catch (java.net.SocketTimeoutException e) {
      stranger("dropped {}: no handshake within {} ms", peer, limits.handshakeTimeout().toMillis());
    } catch (IOException | RuntimeException e) {
      // the client went away, or sent what no client of this store would: either way only it is dropped
      LOG.debug("TCP store on port {}: connection of {} ended: {}", port(), peer, e.toString());
    } finally {
      clients.remove(c);
    }
  }

  /** A frame over the cap cannot be skipped; its sender hears why before the connection closes. */
  private static void tellAndDrop(Socket c, String why) {
    try {
      ByteArrayOutputStream b = new ByteArrayOutputStream();
      DataOutputStream o = new DataOutputStream(b);
      o.writeByte(Wire.ERROR);
      Wire.writeString(o, why);
      DataOutputStream out = new DataOutputStream(c.getOutputStream());
      Wire.writeFrame(out, b.toByteArray());
    } catch (IOException e) {
      // it is being dropped anyway
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

  private byte[] handle(byte[] request, String peer) throws IOException {
    DataInputStream in = new DataInputStream(new ByteArrayInputStream(request));
    ByteArrayOutputStream bytes = new ByteArrayOutputStream();
    DataOutputStream out = new DataOutputStream(bytes);
    if (request.length == 0) {
      throw new IOException("corrupt frame from " + peer + ": an empty request");
    }
    byte op = in.readByte();
    try {
      switch (op) {
        case Wire.PING:
          out.writeByte(Wire.OK);
          break;
        case Wire.SET: {
          String key = key(in, peer);
          store.set(key, value(in, peer));
          out.writeByte(Wire.OK);
          break;
        }
        case Wire.GET: {
          String key = key(in, peer);
          long ms = in.readLong();
          byte[] v = blocking(() -> store.get(key, Duration.ofMillis(ms)));
          out.writeByte(Wire.OK);
          Wire.writeBytes(out, v);
          break;
        }
        case Wire.ADD: {
          String key = key(in, peer);
          long v = store.add(key, in.readLong());
          out.writeByte(Wire.OK);
          out.writeLong(v);
          break;
        }
        case Wire.COMPARE_SET: {
          String key = key(in, peer);
          byte[] expected = value(in, peer);
          byte[] desired = value(in, peer);
          byte[] v = store.compareSet(key, expected, desired);
          out.writeByte(Wire.OK);
          Wire.writeBytes(out, v);
          break;
        }
        case Wire.WAIT: {
          List<String> keys = readKeys(in, peer);
          long ms = in.readLong();
          blocking(() -> {
            store.wait(keys, Duration.ofMillis(ms));
            return null;
          });
          out.writeByte(Wire.OK);
          break;
        }
        case Wire.CHECK: {
          boolean ok = store.check(readKeys(in, peer));
          out.writeByte(Wire.OK);
          out.writeBoolean(ok);
          break;
        }
        case Wire.DELETE: {
          boolean existed = store.deleteKey(key(in, peer));
          out.writeByte(Wire.OK);
          out.writeBoolean(existed);
          break;
        }
        case Wire.NUM_KEYS:
          out.writeByte(Wire.OK);
          out.writeLong(store.numKeys());
          break;
        default:
          out.writeByte(Wire.ERROR);
          Wire.writeString(out, "unknown request " + op);
      }
    } catch (Wire.LimitException e) {
      // The frame was read whole, so the connection stays in step: the client hears why.
      bytes.reset();
      out.writeByte(Wire.ERROR);
      Wire.writeString(out, e.getMessage());
    } catch (StoreTimeoutException e) {
      bytes.reset();
      out.writeByte(Wire.TIMEOUT);
      Wire.writeString(out, e.getMessage());
    } catch (RuntimeException e) {
      bytes.reset();
      out.writeByte(Wire.ERROR);
      Wire.writeString(out, String.valueOf(e.getMessage()));
    }
    out.flush();
    return bytes.toByteArray();
  }

  private List<String> readKeys(DataInputStream in, String peer) throws IOException {
    int n = in.readInt();
    // Each key takes at least its 8-byte length: a count the frame cannot hold is a lie, not an allocation.
    if (n < 0 || n > in.available() / 8) {
      throw new IOException("corrupt frame from " + peer + ": " + n + " keys in " + in.available() + " bytes");
    }
    List<String> keys = new ArrayList<>(n);
    for (int i = 0; i < n; i++) {
      keys.add(key(in, peer));
    }
    return keys;
  }

  private String key(DataInputStream in, String peer) throws IOException {
    return Wire.readString(in, limits.maxKeyBytes(), "a key", "NCCL4J_STORE_MAX_KEY_BYTES", peer);
  }

  private byte[] value(DataInputStream in, String peer) throws IOException {
    return Wire.readBytes(in, limits.maxValueBytes(), "a value", "NCCL4J_STORE_MAX_VALUE_BYTES", peer);
  }

  /** A wait for keys does not hold up close(): only requests being answered do. */
  private <T> T blocking(java.util.function.Supplier<T> wait) {
    answering.decrementAndGet();
    try {
      return wait.get();
    } finally {
      answering.incrementAndGet();
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

  private static final Duration DRAIN = Duration.ofSeconds(2);

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

  @Override
  public String toString() {
    return "TcpStoreServer(port " + port() + (closed ? ", closed" : "") + ")";
  }

  static boolean isClosedSocket(IOException e) {
    return e instanceof SocketException;
  }
}
