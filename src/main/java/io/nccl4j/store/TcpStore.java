package io.nccl4j.store;

import io.nccl4j.BackendException;
import io.nccl4j.concurrent.Durations;
import java.io.BufferedInputStream;
import java.io.BufferedOutputStream;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.time.Duration;
import java.util.List;
import java.util.Objects;

/**
 * A {@link Store} reached over TCP (PyTorch's TCPStore): a client of a {@link TcpStoreServer},
 * which rank 0 hosts ({@link #hostAndConnect}) or which runs standalone. Requests are sequential per
 * client and thread-safe. Connecting retries with exponential backoff until the timeout; every
 * blocking call has a timeout; errors name the address, the keys and how long it waited.
 */
public final class TcpStore implements Store {
  /** Added to a blocking request's own timeout before the client gives up on the server. */
  private static final Duration NETWORK_MARGIN = Duration.ofSeconds(30);

  private final String host;
  private final int port;
  private final Duration timeout;
  private final Socket socket;
  private final DataInputStream in;
  private final DataOutputStream out;
  private final TcpStoreServer server;
  private boolean closed;

  private TcpStore(String host, int port, Duration timeout, Socket socket, TcpStoreServer server) throws IOException {
    this.host = host;
    this.port = port;
    this.timeout = timeout;
    this.socket = socket;
    this.server = server;
    this.in = new DataInputStream(new BufferedInputStream(socket.getInputStream()));
    this.out = new DataOutputStream(new BufferedOutputStream(socket.getOutputStream()));
  }

  /**
   * Connects to the server at {@code host:port}, retrying with exponential backoff (50 ms … 2 s)
   * until {@code timeout}.
   *
   * @throws StoreTimeoutException naming the address and the wait when no server answers in time
   */
  public static TcpStore connect(String host, int port, Duration timeout) {
    return connect(host, port, timeout, null);
  }

  /** Starts a server on {@code port} (0: any free port) and connects to it: what rank 0 does. */
  public static TcpStore hostAndConnect(int port, Duration timeout) {
    TcpStoreServer server = TcpStoreServer.start(port);
    try {
      return connect("127.0.0.1", server.port(), timeout, server);
    } catch (RuntimeException e) {
      server.close();
      throw e;
    }
  }

  private static TcpStore connect(String host, int port, Duration timeout, TcpStoreServer server) {
    Objects.requireNonNull(host, "host");
    long deadline = Durations.deadlineFromNow(timeout);
    long backoff = 50;
    IOException last = null;
    int attempts = 0;
    while (true) {
      attempts++;
      Socket s = new Socket();
      try {
        long left = Math.max(1, (deadline - System.nanoTime()) / 1_000_000);
        s.connect(new InetSocketAddress(host, port), (int) Math.min(left, 10_000));
        s.setTcpNoDelay(true);
        s.setKeepAlive(true);
        TcpStore store = new TcpStore(host, port, timeout, s, server);
        store.handshake(Math.max(1, (deadline - System.nanoTime()) / 1_000_000));
        return store;
      } catch (IOException e) {
        // Keep the most informative error: a timeout of the last, shortest attempt says less than
        // what an earlier attempt learned (refused, not a store, ...).
        if (last == null || !(e instanceof SocketTimeoutException) || last instanceof SocketTimeoutException) {
          last = e;
        }
        try {
          s.close();
        } catch (IOException ignored) {
          // retrying
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

  private static String describe(IOException e) {
    return e.getMessage() != null ? e.getMessage() : e.getClass().getSimpleName();
  }

  private void handshake(long leftMillis) throws IOException {
    socket.setSoTimeout(Durations.clampIntMillis(leftMillis));
    out.writeInt(Wire.MAGIC);
    out.writeShort(Wire.VERSION);
    out.flush();
    int magic = in.readInt();
    short version = in.readShort();
    if (magic != Wire.MAGIC || version != Wire.VERSION) {
      throw new IOException(host + ":" + port + " is not an nccl4j store (magic 0x" + Integer.toHexString(magic)
          + ", version " + version + "; expected 0x" + Integer.toHexString(Wire.MAGIC) + " version " + Wire.VERSION + ")");
    }
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

  @FunctionalInterface
  private interface Body {
    void write(DataOutputStream out) throws IOException;
  }

  /** Sends one request and returns the response's payload after the status byte. */
  private synchronized DataInputStream request(byte op, String what, Duration wait, Body body) {
    if (closed) {
      throw new IllegalStateException("TCP store client of " + host + ":" + port + " is closed");
    }
    try {
      ByteArrayOutputStream b = new ByteArrayOutputStream();
      DataOutputStream o = new DataOutputStream(b);
      o.writeByte(op);
      body.write(o);
      o.flush();
      socket.setSoTimeout(Durations.toIntMillis(Durations.plus(wait, NETWORK_MARGIN)));
      Wire.writeFrame(out, b.toByteArray());
      DataInputStream r = new DataInputStream(new ByteArrayInputStream(Wire.readFrame(in)));
      byte status = r.readByte();
      if (status == Wire.TIMEOUT) {
        throw new StoreTimeoutException("TCP store " + host + ":" + port + ": " + Wire.readString(r));
      }
      if (status == Wire.ERROR) {
        throw new BackendException("TCP store " + host + ":" + port + " failed " + what + ": " + Wire.readString(r));
      }
      return r;
    } catch (SocketTimeoutException e) {
      throw new StoreTimeoutException("TCP store " + host + ":" + port + ": no answer to " + what + " within "
          + Durations.describe(Durations.plus(wait, NETWORK_MARGIN)));
    } catch (IOException e) {
      throw new BackendException("TCP store " + host + ":" + port + ": connection failed during " + what + ": "
          + e.getMessage(), e);
    }
  }

  @Override
  public void set(String key, byte[] value) {
    request(Wire.SET, "set(" + key + ")", Duration.ZERO, o -> {
      Wire.writeString(o, key);
      Wire.writeBytes(o, value);
    });
  }

  @Override
  public byte[] get(String key, Duration wait) {
    try {
      return Wire.readBytes(request(Wire.GET, "get(" + key + ")", wait, o -> {
        Wire.writeString(o, key);
        o.writeLong(Durations.toMillis(wait));
      }));
    } catch (IOException e) {
      throw new BackendException("TCP store " + host + ":" + port + ": corrupt answer to get(" + key + ")", e);
    }
  }

  @Override
  public long add(String key, long delta) {
    try {
      return request(Wire.ADD, "add(" + key + ")", Duration.ZERO, o -> {
        Wire.writeString(o, key);
        o.writeLong(delta);
      }).readLong();
    } catch (IOException e) {
      throw new BackendException("TCP store " + host + ":" + port + ": corrupt answer to add(" + key + ")", e);
    }
  }

  @Override
  public byte[] compareSet(String key, byte[] expected, byte[] desired) {
    try {
      return Wire.readBytes(request(Wire.COMPARE_SET, "compareSet(" + key + ")", Duration.ZERO, o -> {
        Wire.writeString(o, key);
        Wire.writeBytes(o, expected);
        Wire.writeBytes(o, desired);
      }));
    } catch (IOException e) {
      throw new BackendException("TCP store " + host + ":" + port + ": corrupt answer to compareSet(" + key + ")", e);
    }
  }

  @Override
  public void wait(List<String> keys, Duration wait) {
    request(Wire.WAIT, "wait(" + keys + ")", wait, o -> {
      o.writeInt(keys.size());
      for (String k : keys) {
        Wire.writeString(o, k);
      }
      o.writeLong(Durations.toMillis(wait));
    });
  }

  @Override
  public boolean check(List<String> keys) {
    try {
      return request(Wire.CHECK, "check(" + keys + ")", Duration.ZERO, o -> {
        o.writeInt(keys.size());
        for (String k : keys) {
          Wire.writeString(o, k);
        }
      }).readBoolean();
    } catch (IOException e) {
      throw new BackendException("TCP store " + host + ":" + port + ": corrupt answer to check", e);
    }
  }

  @Override
  public boolean deleteKey(String key) {
    try {
      return request(Wire.DELETE, "deleteKey(" + key + ")", Duration.ZERO, o -> Wire.writeString(o, key))
          .readBoolean();
    } catch (IOException e) {
      throw new BackendException("TCP store " + host + ":" + port + ": corrupt answer to deleteKey", e);
    }
  }

  @Override
  public long numKeys() {
    try {
      return request(Wire.NUM_KEYS, "numKeys", Duration.ZERO, o -> { }).readLong();
    } catch (IOException e) {
      throw new BackendException("TCP store " + host + ":" + port + ": corrupt answer to numKeys", e);
    }
  }

  /** Round trip to the server; throws when it does not answer. */
  public void ping() {
    request(Wire.PING, "ping", Duration.ZERO, o -> { });
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
    try {
      socket.close();
    } catch (IOException e) {
      // closing anyway
    }
    if (server != null) {
      server.close();
    }
  }

  @Override
  public String toString() {
    return "TcpStore(" + host + ":" + port + (server != null ? ", hosting" : "") + ")";
  }
}
