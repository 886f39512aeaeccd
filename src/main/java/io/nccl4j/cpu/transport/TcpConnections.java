package io.nccl4j.cpu.transport;

import io.nccl4j.PeerFailureException;
import io.nccl4j.concurrent.Backoff;
import io.nccl4j.concurrent.Durations;
import io.nccl4j.store.Store;
import io.nccl4j.store.StoreTimeoutException;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Collection;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The connections of one {@link TcpTransport} rank: one per peer and channel, made when first
 * needed. The lower rank connects to the higher rank's listener, whose address it reads from the
 * {@link Store}, and introduces itself with the handshake ({@link TcpFrames}); this rank's acceptor
 * thread takes the connections of lower ranks.
 */
final class TcpConnections {
  private static final Logger LOG = LoggerFactory.getLogger(TcpConnections.class);
  /** Between two attempts to connect to a listener that refused: 20 ms, doubling up to 1 s. */
  private static final Backoff CONNECT_RETRY = new Backoff(0, 0, 20_000_000, 1_000_000_000);

  private final TcpTransport transport;
  private final int rank;
  private final int size;
  private final Store store;
  private final String groupId;
  private final Duration connectTimeout;
  private final ServerSocket listener;
  private final Thread acceptor;
  private final Map<Integer, TcpConnection> conns = new ConcurrentHashMap<>();
  private volatile boolean closed;

  /**
   * Listens on an ephemeral port, publishes {@code transport/addr/<rank>} in {@code store} and
   * starts accepting.
   */
  TcpConnections(TcpTransport transport, Store store, String advertisedHost, Duration connectTimeout) {
    this.transport = transport;
    this.rank = transport.rank();
    this.size = transport.size();
    this.store = store;
    this.connectTimeout = connectTimeout;
    if (rank == 0) {
      store.set("transport/gid", UUID.randomUUID().toString().getBytes(StandardCharsets.UTF_8));
    }
    this.groupId = new String(store.get("transport/gid", connectTimeout), StandardCharsets.UTF_8);
    try {
      listener = new ServerSocket();
      listener.bind(new InetSocketAddress((InetAddress) null, 0), 128);
    } catch (IOException e) {
      throw new IllegalStateException("rank " + rank + ": cannot open a listening socket: " + e.getMessage(), e);
    }
    store.set("transport/addr/" + rank,
        (advertisedHost + ":" + listener.getLocalPort()).getBytes(StandardCharsets.UTF_8));
    this.acceptor = new Thread(this::acceptLoop, "nccl4j-tcp-accept-rank" + rank);
    this.acceptor.setDaemon(true);
    this.acceptor.start();
  }

  private static int key(int peer, Tag.Channel channel) {
    return peer * 2 + channel.ordinal();
  }

  private TcpConnection connection(int peer, Tag.Channel channel) {
    return conns.computeIfAbsent(key(peer, channel), k -> new TcpConnection(transport, this, peer, channel));
  }

  /** The connection to {@code peer} for {@code tag}, made now if this rank connects (by {@code deadline}). */
  TcpConnection get(int peer, Tag tag, long deadline) {
    if (peer < 0 || peer >= size || peer == rank) {
      throw new IllegalArgumentException("rank " + rank + " cannot connect to rank " + peer);
    }
    TcpConnection c = connection(peer, tag.channel());
    if (rank < peer) {
      c.connectIfNeeded(tag, deadline);
    }
    return c;
  }

  /** Every connection made so far. */
  Collection<TcpConnection> all() {
    return conns.values();
  }

  private void acceptLoop() {
    while (!closed) {
      Socket s;
      try {
        s = listener.accept();
      } catch (IOException e) {
        if (!closed) {
          LOG.warn("rank {}: accept failed: {}", rank, e.getMessage());
        }
        continue;
      }
      try {
        s.setTcpNoDelay(true);
        s.setSoTimeout(Durations.toIntMillis(connectTimeout));
        TcpFrames.Hello h = TcpFrames.readHello(new DataInputStream(s.getInputStream()));
        if (!h.validFor(groupId, rank)) {
          LOG.warn("rank {}: rejected a connection from {} (magic 0x{}, version {}, group {}, rank {}, channel {})",
              rank, s.getRemoteSocketAddress(), Integer.toHexString(h.magic()), h.version(), h.groupId(), h.rank(),
              h.channel());
          s.close();
          continue;
        }
        connection(h.rank(), Tag.Channel.values()[h.channel()]).attach(s);
      } catch (IOException e) {
        LOG.warn("rank {}: handshake with {} failed: {}", rank, s.getRemoteSocketAddress(), e.getMessage());
        try {
          s.close();
        } catch (IOException ignored) {
          // gone
        }
      }
    }
  }

  /**
   * Connects to {@code peer}'s listener for {@code channel} and introduces this rank, by the
   * operation's deadline (or the connect timeout, if that comes first): a peer that never published
   * its address is a timeout naming it; one whose listener refuses connections until then has gone.
   */
  Socket dial(int peer, Tag.Channel channel, Tag tag, long opDeadline) {
    long started = System.nanoTime();
    long deadline = Durations.deadline(started, connectTimeout);
    if (opDeadline - deadline < 0) {
      deadline = opDeadline;
    }
    String addr;
    try {
      addr = new String(store.get("transport/addr/" + peer,
          Duration.ofNanos(Math.max(1_000_000, deadline - System.nanoTime()))), StandardCharsets.UTF_8);
    } catch (StoreTimeoutException e) {
      throw new TransportTimeoutException("waiting for rank " + peer + " to join the group (" + tag + ")");
    }
    int colon = addr.lastIndexOf(':');
    String host = addr.substring(0, colon);
    int port = Integer.parseInt(addr.substring(colon + 1));
    IOException last = null;
    for (int round = 0; System.nanoTime() - deadline < 0; round++) {
      transport.checkFailed(); // the group failed meanwhile: stop dialling a peer that may be gone
      Socket s = new Socket();
      try {
        // deadline is started + connectTimeout, so what is left never exceeds the timeout itself.
        s.connect(new InetSocketAddress(host, port),
            Durations.clampIntMillis(Durations.nanosLeft(deadline) / 1_000_000));
        s.setTcpNoDelay(true);
        TcpFrames.writeHello(new DataOutputStream(s.getOutputStream()), groupId, rank, channel);
        return s;
      } catch (IOException e) {
        last = e;
        transport.adoptFailureFromStore(); // a refused peer may have failed and left: its own words are there
        try {
          s.close();
        } catch (IOException ignored) {
          // retrying
        }
      }
      CONNECT_RETRY.pause(round, deadline);
    }
    if (last == null) {
      throw new TransportTimeoutException("waiting to connect to rank " + peer + " (" + tag + ")");
    }
    throw new PeerFailureException(peer, "rank " + rank + " could not connect to rank " + peer + " at " + addr
        + " within " + (System.nanoTime() - started) / 1_000_000 + " ms: "
        + (last == null ? "timed out" : last.getMessage()));
  }

  /** Stops accepting and closes every connection. */
  void close() {
    closed = true;
    try {
      listener.close();
    } catch (IOException e) {
      // closing anyway
    }
    for (TcpConnection c : conns.values()) {
      c.close();
    }
  }
}
