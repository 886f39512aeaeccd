package io.nccl4j.internal.transport.tcp;

import io.nccl4j.BackendException;
import io.nccl4j.PeerFailureException;
import io.nccl4j.TransportTimeoutException;
import io.nccl4j.internal.concurrent.Backoff;
import io.nccl4j.internal.concurrent.Durations;
import io.nccl4j.internal.transport.GroupFailureState;
import io.nccl4j.internal.transport.TransferTag;
import io.nccl4j.internal.transport.process.Departures;
import io.nccl4j.internal.transport.process.StoredFailure;
import io.nccl4j.store.JobIdentity;
import io.nccl4j.store.ListenerLimits;
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
import java.util.concurrent.Semaphore;
import java.util.concurrent.atomic.AtomicBoolean;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The connections of one {@link TcpTransport} rank: one per peer and channel, made when first
 * needed. The lower rank connects to the higher rank's listener, whose address it reads from the
 * {@link Store}, and introduces itself with the handshake ({@link TcpFrames}); this rank's acceptor
 * thread takes the connections of lower ranks.
 *
 * <p>The listener is reachable by anyone who can reach its port, so what arrives is hostile until its handshake
 * proves it: each connection introduces itself on its own thread, within a deadline, and must answer a challenge
 * with the job's token (or, for a job without one, with the group id read from the store); anything else is
 * dropped, and the listener goes on accepting.
 */
final class TcpConnections {
  private static final Logger LOG = LoggerFactory.getLogger(TcpConnections.class);
  /** Between two attempts to connect to a listener that refused: 20 ms, doubling up to 1 s. */
  private static final Backoff CONNECT_RETRY = new Backoff(0, 0, 20_000_000, 1_000_000_000);
  /**
   * How long a listener that refuses connections is retried once its address is published: it listened
   * before it published, so a refusal means its rank has gone; the retry only covers a transient refusal.
   */
  private static final long REFUSED_GRACE_NANOS = 1_000_000_000L;
  private static final int MAX_HANDSHAKES = 64;

  private final TcpTransport transport;
  /** The group's failure: what every wait checks, and where a failure seen here is recorded. */
  private final GroupFailureState failures;
  /** The group's failure as the store holds it, adopted when a peer cannot be reached. */
  private final StoredFailure stored;
  private final int rank;
  private final int size;
  private final Store store;
  private final String groupId;
  private final Duration connectTimeout;
  private final ServerSocket listener;
  private final Thread acceptor;
  private final Map<Integer, TcpConnection> conns = new ConcurrentHashMap<>();
  private final JobIdentity job;
  /** How long a new connection may take to introduce itself, on either side. */
  private final Duration handshakeTimeout;
  /** Handshakes run at once; more connections than this are closed unread (a flood must not make threads). */
  private final Semaphore handshakes = new Semaphore(MAX_HANDSHAKES);
  /** The first stranger is logged at WARN, the others at DEBUG: a port scan must not flood the log. */
  private final AtomicBoolean warned = new AtomicBoolean();
  private volatile boolean closed;
  /** The ranks' departure notices: this rank's registered, the peers' read where they stand. */
  private final Departures departures;

  /**
   * Listens on an ephemeral port, publishes {@code transport/addr/<rank>} in {@code store} and
   * starts accepting; this rank's {@code departures} are registered already.
   */
  TcpConnections(TcpTransport transport, Store store, String advertisedHost, InetAddress bind, JobIdentity job,
      Duration connectTimeout, Departures departures) {
    this.transport = transport;
    this.failures = transport.failures();
    this.stored = transport.stored();
    this.departures = departures;
    this.job = job;
    this.handshakeTimeout = ListenerLimits.fromEnvironment().handshakeTimeout();
    this.rank = transport.rank();
    this.size = transport.size();
    this.store = store;
    this.connectTimeout = connectTimeout;
    if (rank == 0) {
      store.set(Departures.GROUP_ID_KEY, UUID.randomUUID().toString().getBytes(StandardCharsets.UTF_8));
    }
    this.groupId = new String(store.get(Departures.GROUP_ID_KEY, connectTimeout), StandardCharsets.UTF_8);
    Departures.check(groupId, rank, 0, "waiting for rank 0's group id");
    try {
      listener = new ServerSocket();
      listener.bind(new InetSocketAddress(bind, 0), 128);
    } catch (IOException e) {
      throw new IllegalStateException("rank " + rank + ": cannot open a listening socket: " + e.getMessage(), e);
    }
    store.set(Departures.ADDRESS_KEY + rank,
        (advertisedHost + ":" + listener.getLocalPort()).getBytes(StandardCharsets.UTF_8));
    this.acceptor = new Thread(this::acceptLoop, "nccl4j-tcp-accept-rank" + rank);
    this.acceptor.setDaemon(true);
    this.acceptor.start();
  }

  Departures departures() {
    return departures;
  }

  /** The group's id, the same on every rank (rank 0 drew it and left it in the store). */
  String groupId() {
    return groupId;
  }

  /** The job's id ("" for none). */
  String jobId() {
    return job.id();
  }

  private static int key(int peer, TransferTag.Channel channel) {
    return peer * 2 + channel.ordinal();
  }

  private TcpConnection connection(int peer, TransferTag.Channel channel) {
    return conns.computeIfAbsent(key(peer, channel), k -> new TcpConnection(transport, this, peer, channel));
  }

  /** The connection to {@code peer} for {@code tag}, made now if this rank connects (by {@code deadline}). */
  TcpConnection get(int peer, TransferTag tag, long deadline) {
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

  /**
   * Takes connections; each introduces itself on a thread of its own, so that one that sends nothing, too
   * little or garbage delays no other and cannot stop this loop.
   */
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
      if (closed) {
        // close() does not stop an accept already blocked at once: the socket may still take a connection, which
        // must not be admitted to a transport that has closed.
        closeQuietly(s);
        return;
      }
      if (!handshakes.tryAcquire()) {
        stranger("rank {}: closed a connection from {}: {} handshakes already running", rank,
            s.getRemoteSocketAddress(), MAX_HANDSHAKES);
        closeQuietly(s);
        continue;
      }
      try {
        Thread t = new Thread(() -> {
          try {
            accept(s);
          } finally {
            handshakes.release();
          }
        }, "nccl4j-tcp-handshake-rank" + rank);
        t.setDaemon(true);
        t.start();
      } catch (RuntimeException | Error e) {
        handshakes.release();
        closeQuietly(s);
        LOG.warn("rank {}: cannot start a handshake thread: {}", rank, e.toString());
      }
    }
  }

  /** The accepting side of the handshake: hello, challenge, proof, verdict; anything else drops the socket. */
  private void accept(Socket s) {
    Object peer = s.getRemoteSocketAddress();
    try {
      s.setTcpNoDelay(true);
      s.setSoTimeout((int) Math.max(1, Math.min(Integer.MAX_VALUE, handshakeTimeout.toMillis())));
      DataInputStream in = new DataInputStream(s.getInputStream());
      DataOutputStream out = new DataOutputStream(s.getOutputStream());
      TcpFrames.Hello h = TcpFrames.readHello(in);
      if (!h.validFor(groupId, rank)) {
        stranger("rank {}: rejected a connection from {} (magic 0x{}, version {}, group {}, rank {}, channel {})",
            rank, peer, Integer.toHexString(h.magic()), h.version(), h.groupId(), h.rank(), h.channel());
        closeQuietly(s);
        return;
      }
      byte[] nonce = JobIdentity.nonce();
      out.write(nonce);
      out.flush();
      byte[] proof = in.readNBytes(JobIdentity.NONCE_BYTES);
      if (!job.verify(nonce, TcpFrames.proofContext(groupId, h.rank(), h.channel()), proof)) {
        stranger("rank {}: refused a connection from {} claiming to be rank {}: its proof of the job's token is"
            + " wrong", rank, peer, h.rank());
        out.writeByte(TcpFrames.HELLO_REFUSED);
        out.flush();
        closeQuietly(s);
        return;
      }
      if (closed) {
        closeQuietly(s);
        return;
      }
      out.writeByte(TcpFrames.HELLO_OK);
      out.flush();
      TcpConnection c = connection(h.rank(), TransferTag.Channel.fromWireCode(h.channel()));
      c.attach(s);
      if (closed) {
        // close() may have gone through the connections before this one was made: it must not outlive them.
        c.close();
      }
    } catch (IOException | RuntimeException e) {
      stranger("rank {}: handshake with {} failed: {}", rank, peer, e.toString());
      closeQuietly(s);
    }
  }

  private void stranger(String format, Object... args) {
    if (warned.compareAndSet(false, true)) {
      LOG.warn(format + " (further such connections are logged at DEBUG)", args);
    } else {
      LOG.debug(format, args);
    }
  }

  private static void closeQuietly(Socket s) {
    try {
      s.close();
    } catch (IOException ignored) {
      // gone
    }
  }

  /**
   * Connects to {@code peer}'s listener for {@code channel} and introduces this rank, by the
   * operation's deadline (or the connect timeout, if that comes first): a peer that never published
   * its address is a timeout naming it, one that left the store before publishing it fails at once
   * ({@link Departures}); one whose listener refuses connections once published has gone, which is
   * reported within about a second.
   */
  Socket dial(int peer, TransferTag.Channel channel, TransferTag tag, long opDeadline) {
    long started = System.nanoTime();
    long deadline = Durations.deadline(started, connectTimeout);
    if (opDeadline - deadline < 0) {
      deadline = opDeadline;
    }
    String addr;
    try {
      addr = new String(store.get(Departures.ADDRESS_KEY + peer,
          Duration.ofNanos(Math.max(1_000_000, deadline - System.nanoTime()))), StandardCharsets.UTF_8);
    } catch (StoreTimeoutException e) {
      throw new TransportTimeoutException("waiting for rank " + peer + " to join the group (" + tag + ")");
    }
    departures.checkAddress(addr, peer, "waiting for rank " + peer + "'s transport address (" + tag + ")");
    int colon = addr.lastIndexOf(':');
    String host = addr.substring(0, colon);
    int port = Integer.parseInt(addr.substring(colon + 1));
    IOException last = null;
    long refusedSince = 0;
    for (int round = 0; System.nanoTime() - deadline < 0; round++) {
      failures.check(); // the group failed meanwhile: stop dialling a peer that may be gone
      Socket s = new Socket();
      try {
        // deadline is started + connectTimeout, so what is left never exceeds the timeout itself.
        s.connect(new InetSocketAddress(host, port),
            Durations.clampIntMillis(Durations.nanosLeft(deadline) / 1_000_000));
        if (s.getLocalSocketAddress().equals(s.getRemoteSocketAddress())) {
          // Connecting to a port of this machine that nothing listens on may pick that port as the source:
          // TCP's simultaneous open then connects the socket to itself. Nothing listens: that is a refusal.
          throw new java.net.ConnectException("Connection refused (connected to itself: nothing listens on " + addr
              + ")");
        }
        s.setTcpNoDelay(true);
        introduce(s, peer, addr, channel, deadline);
        return s;
      } catch (java.net.ConnectException e) {
        last = e;
        closeQuietly(s);
        // A refused peer may have failed and closed: the failure it left in the store is the cause.
        stored.adopt();
        failures.check();
        refusedSince = refusedSince == 0 ? System.nanoTime() : refusedSince;
        if (System.nanoTime() - refusedSince > REFUSED_GRACE_NANOS) {
          throw new PeerFailureException(peer, "rank " + rank + " could not connect to rank " + peer + " at " + addr
              + ": " + e.getMessage() + " for " + (System.nanoTime() - refusedSince) / 1_000_000 + " ms after rank "
              + peer + " published that address: rank " + peer + " has exited or closed its transport");
        }
      } catch (IOException e) {
        last = e;
        closeQuietly(s);
        stored.adopt();
        failures.check();
      } catch (RuntimeException e) {
        closeQuietly(s);
        throw e;
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

  /** The connecting side of the handshake: hello, then the proof that answers the listener's challenge. */
  private void introduce(Socket s, int peer, String addr, TransferTag.Channel channel, long deadline)
      throws IOException {
    long left = Math.max(1, (deadline - System.nanoTime()) / 1_000_000);
    s.setSoTimeout((int) Math.min(left, Math.max(1, Math.min(Integer.MAX_VALUE, handshakeTimeout.toMillis()))));
    DataOutputStream out = new DataOutputStream(s.getOutputStream());
    DataInputStream in = new DataInputStream(s.getInputStream());
    TcpFrames.writeHello(out, groupId, rank, channel);
    byte[] nonce = new byte[JobIdentity.NONCE_BYTES];
    in.readFully(nonce);
    out.write(job.prove(nonce, TcpFrames.proofContext(groupId, rank, channel.wireCode())));
    out.flush();
    int verdict = in.read();
    if (verdict < 0) {
      // Closed without a verdict: the peer closed its transport (perhaps failing: then its cause is
      // in the store), or an older peer. Retried like a refusal.
      throw new java.io.EOFException("rank " + peer + " at " + addr + " closed the connection during the handshake");
    }
    if (verdict != TcpFrames.HELLO_OK) {
      throw new BackendException("rank " + rank + ": rank " + peer + " at " + addr + " refused this rank's"
          + " connection (verdict " + verdict + "): the two ranks do not hold the"
          + " same job token (" + JobIdentity.TOKEN_ENV + "); are they of one job?");
    }
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
