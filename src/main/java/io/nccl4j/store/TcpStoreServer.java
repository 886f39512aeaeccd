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
import java.util.concurrent.atomic.AtomicInteger;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The server side of {@link TcpStore}: a {@link HashStore} behind a socket, one thread per client
 * (a blocking GET holds only its own client's thread). Hosted by rank 0 or standalone.
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

  private TcpStoreServer(ServerSocket server) {
    this.server = server;
    this.acceptor = new Thread(this::acceptLoop, "nccl4j-store-server:" + server.getLocalPort());
    this.acceptor.setDaemon(true);
    this.acceptor.start();
    this.exitHook = new Thread(this::drainAndClose, "nccl4j-store-server-exit:" + server.getLocalPort());
    Runtime.getRuntime().addShutdownHook(exitHook);
  }

  /**
   * Listens on {@code port} (0: any free port) on every interface.
   *
   * @throws IllegalStateException naming the port when it cannot be bound
   */
  public static TcpStoreServer start(int port) {
    try {
      ServerSocket s = new ServerSocket();
      s.setReuseAddress(true);
      s.bind(new InetSocketAddress((InetAddress) null, port), 1024);
      return new TcpStoreServer(s);
    } catch (IOException e) {
      throw new IllegalStateException("TCP store: cannot listen on port " + port + ": " + e.getMessage(), e);
    }
  }

  /** The TCP port the server listens on: the one asked for, or the one chosen for port 0. */
  public int port() {
    return server.getLocalPort();
  }

  private void acceptLoop() {
    while (!closed) {
      try {
        Socket c = server.accept();
        c.setTcpNoDelay(true);
        clients.add(c);
        Thread t = new Thread(() -> serve(c), "nccl4j-store-client:" + c.getRemoteSocketAddress());
        t.setDaemon(true);
        t.start();
      } catch (IOException e) {
        if (!closed) {
          LOG.warn("TCP store on port {}: accept failed: {}", port(), e.getMessage());
        }
      }
    }
  }

  private void serve(Socket c) {
    try (c;
         DataInputStream in = new DataInputStream(new BufferedInputStream(c.getInputStream()));
         DataOutputStream out = new DataOutputStream(new BufferedOutputStream(c.getOutputStream()))) {
      int magic = in.readInt();
      short version = in.readShort();
      out.writeInt(Wire.MAGIC);
      out.writeShort(Wire.VERSION);
      out.flush();
      if (magic != Wire.MAGIC || version != Wire.VERSION) {
        LOG.warn("TCP store on port {}: rejected {} (magic 0x{}, version {}; expected 0x{} version {})", port(),
            c.getRemoteSocketAddress(), Integer.toHexString(magic), version, Integer.toHexString(Wire.MAGIC),
            Wire.VERSION);
        return;
      }
      while (!closed) {
        byte[] request = Wire.readFrame(in);
        answering.incrementAndGet();
        try {
          Wire.writeFrame(out, handle(request));
        } finally {
          answering.decrementAndGet();
        }
      }
    } catch (IOException e) {
      // the client went away
    } finally {
      clients.remove(c);
    }
  }

  private byte[] handle(byte[] request) throws IOException {
    DataInputStream in = new DataInputStream(new ByteArrayInputStream(request));
    ByteArrayOutputStream bytes = new ByteArrayOutputStream();
    DataOutputStream out = new DataOutputStream(bytes);
    byte op = in.readByte();
    try {
      switch (op) {
        case Wire.PING:
          out.writeByte(Wire.OK);
          break;
        case Wire.SET: {
          String key = Wire.readString(in);
          store.set(key, Wire.readBytes(in));
          out.writeByte(Wire.OK);
          break;
        }
        case Wire.GET: {
          String key = Wire.readString(in);
          long ms = in.readLong();
          byte[] v = blocking(() -> store.get(key, Duration.ofMillis(ms)));
          out.writeByte(Wire.OK);
          Wire.writeBytes(out, v);
          break;
        }
        case Wire.ADD: {
          String key = Wire.readString(in);
          long v = store.add(key, in.readLong());
          out.writeByte(Wire.OK);
          out.writeLong(v);
          break;
        }
        case Wire.COMPARE_SET: {
          String key = Wire.readString(in);
          byte[] expected = Wire.readBytes(in);
          byte[] desired = Wire.readBytes(in);
          byte[] v = store.compareSet(key, expected, desired);
          out.writeByte(Wire.OK);
          Wire.writeBytes(out, v);
          break;
        }
        case Wire.WAIT: {
          List<String> keys = readKeys(in);
          long ms = in.readLong();
          blocking(() -> {
            store.wait(keys, Duration.ofMillis(ms));
            return null;
          });
          out.writeByte(Wire.OK);
          break;
        }
        case Wire.CHECK: {
          boolean ok = store.check(readKeys(in));
          out.writeByte(Wire.OK);
          out.writeBoolean(ok);
          break;
        }
        case Wire.DELETE: {
          boolean existed = store.deleteKey(Wire.readString(in));
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

  private static List<String> readKeys(DataInputStream in) throws IOException {
    int n = in.readInt();
    List<String> keys = new ArrayList<>(n);
    for (int i = 0; i < n; i++) {
      keys.add(Wire.readString(in));
    }
    return keys;
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
