package io.nccl4j.cpu.transport;

import io.nccl4j.CollectiveMismatchException;
import io.nccl4j.CollectiveTimeoutException;
import io.nccl4j.OpType;
import io.nccl4j.PeerFailureException;
import io.nccl4j.memory.NativeMemory;
import io.nccl4j.store.Store;
import io.nccl4j.store.StoreTimeoutException;
import java.io.BufferedInputStream;
import java.io.BufferedOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.EOFException;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.locks.LockSupport;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The CPU backend's transport between processes: one TCP connection per pair of ranks and channel,
 * full duplex — a writer thread per connection sends while the rank's execution thread receives.
 * Connections are made when first needed; the lower rank connects to the higher rank's listener,
 * whose address it reads from the {@link Store}. Frames carry the operation tag and the size, so
 * mismatched ranks fail instead of mixing data.
 *
 * <p>A peer that dies or disconnects fails every pending and later operation of this rank with a
 * {@link PeerFailureException} naming it ("connection closed by peer"). When this rank fails, it
 * sends an abort frame with the root cause to every connected peer, so failures name their origin.
 * A timeout travels as a timeout: when this rank's operation timed out, the frame says so, and
 * peers (and their peers) fail with a {@link TransportTimeoutException} quoting it — the backend's
 * {@link io.nccl4j.CollectiveTimeoutException}, as if their own watchdog had fired — rather than a
 * {@link PeerFailureException} blaming a rank that did not fail but waited, like them, for a
 * stopped or slow one.
 */
public final class TcpTransport implements Transport {
  private static final Logger LOG = LoggerFactory.getLogger(TcpTransport.class);
  private static final int MAGIC = 0x4e344a54; // "N4JT"
  private static final short VERSION = 2;
  private static final byte DATA = 1;
  private static final byte ABORT = 2;
  /** An abort frame whose root rank timed out. */
  private static final byte ABORT_TIMEOUT = 3;
  private static final int HEADER_BYTES = 19;
  private static final int CHUNK = 1 << 20;
  private static final int POLL_MS = 100;

  private final int rank;
  private final int size;
  private final Store store;
  private final String groupId;
  private final ServerSocket listener;
  private final Thread acceptor;
  private final Map<Integer, Conn> conns = new ConcurrentHashMap<>();
  private final AtomicReference<Failure> failure = new AtomicReference<>();
  private final Duration connectTimeout;
  private final long staging;
  private final byte[] readBuf = new byte[CHUNK];
  /** Receives in progress; close() frees the staging buffer only when there are none. */
  private final AtomicInteger receivers = new AtomicInteger();
  private volatile boolean closed;

  /** {@code timeout}: {@code rank} timed out (it did not fail); this rank's operations time out too. */
  private record Failure(int rank, String message, Throwable cause, boolean timeout) {}

  /**
   * Creates this rank's endpoint: listens on an ephemeral port and publishes
   * {@code transport/addr/<rank>} in {@code store}.
   *
   * @param advertisedHost the address peers should connect to (reachable from every rank)
   */
  public TcpTransport(int rank, int size, Store store, String advertisedHost, Duration connectTimeout) {
    this.rank = rank;
    this.size = size;
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
    this.staging = NativeMemory.allocate(CHUNK);
    this.acceptor = new Thread(this::acceptLoop, "nccl4j-tcp-accept-rank" + rank);
    this.acceptor.setDaemon(true);
    this.acceptor.start();
  }

  @Override
  public int rank() {
    return rank;
  }

  @Override
  public int size() {
    return size;
  }

  // ------------------------------------------------------------------ connections

  private static int key(int peer, Tag.Channel channel) {
    return peer * 2 + channel.ordinal();
  }

  /** The connection to {@code peer} for {@code tag}, made now if this rank connects (by {@code deadline}). */
  private Conn conn(int peer, Tag tag, long deadline) {
    Tag.Channel channel = tag.channel();
    if (peer < 0 || peer >= size || peer == rank) {
      throw new IllegalArgumentException("rank " + rank + " cannot connect to rank " + peer);
    }
    Conn c = conns.computeIfAbsent(key(peer, channel), k -> new Conn(peer, channel));
    if (rank < peer) {
      c.connectIfNeeded(tag, deadline);
    }
    return c;
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
        s.setSoTimeout((int) connectTimeout.toMillis());
        DataInputStream in = new DataInputStream(s.getInputStream());
        int magic = in.readInt();
        short version = in.readShort();
        String gid = new String(in.readNBytes(in.readInt()), StandardCharsets.UTF_8);
        int peer = in.readInt();
        int ch = in.readByte();
        if (magic != MAGIC || version != VERSION || !gid.equals(groupId) || peer < 0 || peer >= rank
            || ch < 0 || ch >= Tag.Channel.values().length) {
          LOG.warn("rank {}: rejected a connection from {} (magic 0x{}, version {}, group {}, rank {}, channel {})",
              rank, s.getRemoteSocketAddress(), Integer.toHexString(magic), version, gid, peer, ch);
          s.close();
          continue;
        }
        conns.computeIfAbsent(key(peer, Tag.Channel.values()[ch]), k -> new Conn(peer, Tag.Channel.values()[ch]))
            .attach(s);
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

  // ------------------------------------------------------------------ Transport

  @Override
  public PendingSend post(Tag tag, long deadline, int to, long src, long bytes) {
    ensureOpen();
    checkFailed();
    Conn c = conn(to, tag, deadline);
    SendJob job = new SendJob(tag, src, bytes, c, deadline);
    c.queue.add(job);
    return job;
  }

  @Override
  public void receive(Tag tag, long deadline, int from, long dst, long bytes, Combiner combiner) {
    // Counted before checking that the transport is open, so that close() either sees this receive
    // (and waits for it before freeing the staging buffer) or this receive sees close().
    receivers.incrementAndGet();
    try {
      receiveOpen(tag, deadline, from, dst, bytes, combiner);
    } finally {
      receivers.decrementAndGet();
    }
  }

  private void receiveOpen(Tag tag, long deadline, int from, long dst, long bytes, Combiner combiner) {
    ensureOpen();
    checkFailed();
    Conn c = conn(from, tag, deadline);
    c.awaitAttached(deadline, "waiting for rank " + from + " to connect (" + tag + ")");
    InputStream in = c.in;
    byte[] header = new byte[HEADER_BYTES];
    readFully(c, in, header, 0, 1, deadline, tag);
    if (header[0] == ABORT || header[0] == ABORT_TIMEOUT) {
      throw readAbort(c, in, deadline, tag, header[0] == ABORT_TIMEOUT);
    }
    readFully(c, in, header, 1, HEADER_BYTES - 1, deadline, tag);
    Tag.Channel channel = Tag.Channel.values()[header[1]];
    OpType op = OpType.values()[header[2]];
    long seq = getLong(header, 3);
    long n = getLong(header, 11);
    Tag got = new Tag(channel, op, seq);
    if (!got.equals(tag)) {
      throw new CollectiveMismatchException("rank " + from + " sent data for " + got + " but rank " + rank
          + " is running " + tag);
    }
    if (n != bytes) {
      throw new CollectiveMismatchException("in " + tag + ", rank " + from + " sends " + n + " bytes to rank "
          + rank + ", but rank " + rank + " expects " + bytes + " bytes from rank " + from);
    }
    for (long off = 0; off < bytes; ) {
      int part = (int) Math.min(CHUNK, bytes - off);
      readFully(c, in, readBuf, 0, part, deadline, tag);
      if (combiner == null) {
        NativeMemory.copyFromArray(readBuf, 0, dst + off, part);
      } else {
        NativeMemory.copyFromArray(readBuf, 0, staging, part);
        combiner.combine(staging, dst + off, off, part);
      }
      off += part;
    }
  }

  private RuntimeException readAbort(Conn c, InputStream in, long deadline, Tag tag, boolean timeout) {
    byte[] b = new byte[8];
    readFully(c, in, b, 0, 8, deadline, tag);
    int root = (int) (getLong(b, 0) >>> 32);
    int len = (int) getLong(b, 0);
    byte[] msg = new byte[Math.max(0, Math.min(len, 1 << 16))];
    readFully(c, in, msg, 0, msg.length, deadline, tag);
    String text = new String(msg, StandardCharsets.UTF_8);
    if (timeout) {
      record(new Failure(root, text, null, true));
      return new TransportTimeoutException("waiting for " + tag + " data from rank " + c.peer + " when "
          + quoted(text));
    }
    PeerFailureException e = new PeerFailureException(root, text);
    fail(root, e);
    return e;
  }

  /** Reads exactly {@code len} bytes, polling so that deadlines and failures are noticed. */
  private void readFully(Conn c, InputStream in, byte[] b, int off, int len, long deadline, Tag tag) {
    int done = 0;
    while (done < len) {
      int r;
      try {
        r = in.read(b, off + done, len - done);
      } catch (SocketTimeoutException e) {
        checkFailed();
        if (System.nanoTime() - deadline > 0) {
          throw new TransportTimeoutException("waiting for " + tag + " data from rank " + c.peer);
        }
        continue;
      } catch (IOException e) {
        checkFailed();
        // A peer that died with our data unread answers with a reset rather than a clean close.
        throw c.lost("connection closed by peer (" + e.getMessage() + ")");
      }
      if (r < 0) {
        checkFailed();
        throw c.lost("connection closed by peer");
      }
      done += r;
    }
  }

  private static long getLong(byte[] b, int at) {
    long v = 0;
    for (int i = 0; i < 8; i++) {
      v = (v << 8) | (b[at + i] & 0xffL);
    }
    return v;
  }

  private static void putLong(byte[] b, int at, long v) {
    for (int i = 7; i >= 0; i--) {
      b[at + i] = (byte) v;
      v >>>= 8;
    }
  }

  /** Use after close would post to closed connections and stage data in freed memory. */
  private void ensureOpen() {
    if (closed) {
      throw new IllegalStateException("TCP transport of rank " + rank + " is closed");
    }
  }

  private void checkFailed() {
    Failure f = failure.get();
    if (f != null) {
      if (f.timeout) {
        throw new TransportTimeoutException("interrupted when " + quoted(f.message), f.rank);
      }
      throw new PeerFailureException(f.rank, f.message, f.cause);
    }
  }

  /** Another rank's message inside this rank's (which the backend ends with a period). */
  private static String quoted(String message) {
    return message.endsWith(".") ? message.substring(0, message.length() - 1) : message;
  }

  @Override
  public void fail(int failedRank, Throwable cause) {
    if (cause instanceof PeerFailureException) {
      record(new Failure(((PeerFailureException) cause).failedRank(), cause.getMessage(), cause, false));
    } else if (cause instanceof CollectiveTimeoutException) {
      String said = "rank " + failedRank + " timed out: ";
      String m = cause.getMessage().startsWith(said) ? cause.getMessage() : said + cause.getMessage();
      record(new Failure(failedRank, m, cause, true));
    } else {
      record(new Failure(failedRank, "rank " + failedRank + " failed: " + cause.getClass().getSimpleName() + ": "
          + cause.getMessage(), cause, false));
    }
  }

  /** The first failure wins: it is kept, and every connected peer is told, then the connections stop. */
  private void record(Failure f) {
    if (!failure.compareAndSet(null, f)) {
      return;
    }
    // Tell every connected peer why, then stop: blocked readers and writers wake up.
    byte[] text = f.message.getBytes(StandardCharsets.UTF_8);
    for (Conn c : conns.values()) {
      c.abort(f.timeout ? ABORT_TIMEOUT : ABORT, f.rank, text);
    }
  }

  @Override
  public void close() {
    if (closed) {
      return;
    }
    closed = true;
    try {
      listener.close();
    } catch (IOException e) {
      // closing anyway
    }
    for (Conn c : conns.values()) {
      c.close();
    }
    // A receive abandoned by its backend (still running after the timeout) may be reducing from the
    // staging buffer; closed sockets stop it within one read. Freeing under it would corrupt memory,
    // so the buffer is leaked, with a warning, if it does not stop.
    long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
    while (receivers.get() > 0 && System.nanoTime() - until < 0) {
      LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(1));
    }
    if (receivers.get() > 0) {
      LOG.warn("rank {}: a receive is still running after close; its {} byte staging buffer is not freed", rank,
          CHUNK);
      return;
    }
    NativeMemory.free(staging);
  }

  // ------------------------------------------------------------------ one connection

  private final class Conn {
    final int peer;
    final Tag.Channel channel;
    final LinkedBlockingQueue<Object> queue = new LinkedBlockingQueue<>();
    /** Held while one frame is written, so an abort frame never lands inside a data frame. */
    final java.util.concurrent.locks.ReentrantLock writeLock = new java.util.concurrent.locks.ReentrantLock();
    volatile Socket socket;
    volatile InputStream in;
    volatile OutputStream out;
    volatile String lostReason;
    private final Object lock = new Object();
    private final Thread writer;

    Conn(int peer, Tag.Channel channel) {
      this.peer = peer;
      this.channel = channel;
      this.writer = new Thread(this::writeLoop, "nccl4j-tcp-write-rank" + rank + "-to" + peer + "-" + channel);
      this.writer.setDaemon(true);
      this.writer.start();
    }

    /**
     * Connects to the peer's listener, by the operation's deadline (or the connect timeout, if that
     * comes first): a peer that never published its address is a timeout naming it; one whose
     * listener refuses connections until then has gone.
     */
    void connectIfNeeded(Tag tag, long opDeadline) {
      synchronized (lock) {
        if (socket != null || lostReason != null) {
          return;
        }
        long started = System.nanoTime();
        long deadline = started + connectTimeout.toNanos();
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
        long backoff = 20;
        IOException last = null;
        while (System.nanoTime() - deadline < 0) {
          Socket s = new Socket();
          try {
            s.connect(new InetSocketAddress(host, port),
                (int) Math.max(1, Math.min(connectTimeout.toMillis(), (deadline - System.nanoTime()) / 1_000_000)));
            s.setTcpNoDelay(true);
            DataOutputStream o = new DataOutputStream(s.getOutputStream());
            byte[] gid = groupId.getBytes(StandardCharsets.UTF_8);
            o.writeInt(MAGIC);
            o.writeShort(VERSION);
            o.writeInt(gid.length);
            o.write(gid);
            o.writeInt(rank);
            o.writeByte(channel.ordinal());
            o.flush();
            attachLocked(s);
            return;
          } catch (IOException e) {
            last = e;
            try {
              s.close();
            } catch (IOException ignored) {
              // retrying
            }
          }
          LockSupport.parkNanos(Math.min(TimeUnit.MILLISECONDS.toNanos(backoff), deadline - System.nanoTime()));
          backoff = Math.min(1000, backoff * 2);
        }
        if (last == null) {
          throw new TransportTimeoutException("waiting to connect to rank " + peer + " (" + tag + ")");
        }
        throw new PeerFailureException(peer, "rank " + rank + " could not connect to rank " + peer + " at " + addr
            + " within " + (System.nanoTime() - started) / 1_000_000 + " ms: "
            + (last == null ? "timed out" : last.getMessage()));
      }
    }

    void attach(Socket s) {
      synchronized (lock) {
        attachLocked(s);
      }
    }

    private void attachLocked(Socket s) {
      try {
        s.setSoTimeout(POLL_MS);
        s.setKeepAlive(true);
        in = new BufferedInputStream(s.getInputStream(), 1 << 16);
        out = new BufferedOutputStream(s.getOutputStream(), 1 << 16);
      } catch (IOException e) {
        lostReason = e.getMessage();
        return;
      }
      socket = s;
      lock.notifyAll();
    }

    void awaitAttached(long deadline, String what) {
      synchronized (lock) {
        while (socket == null) {
          checkFailed();
          if (lostReason != null) {
            throw lost(lostReason);
          }
          if (closed) {
            throw new IllegalStateException("transport of rank " + rank + " is closed");
          }
          long left = deadline - System.nanoTime();
          if (left <= 0) {
            throw new TransportTimeoutException(what);
          }
          try {
            lock.wait(Math.max(1, Math.min(POLL_MS, left / 1_000_000)));
          } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new TransportTimeoutException(what + " (interrupted)");
          }
        }
      }
    }

    PeerFailureException lost(String why) {
      lostReason = why;
      PeerFailureException e = new PeerFailureException(peer, "rank " + rank + ": " + why + ": rank " + peer
          + (socket == null ? "" : " (" + socket.getRemoteSocketAddress() + ")"));
      fail(peer, e);
      return e;
    }

    private void writeLoop() {
      byte[] buf = new byte[CHUNK];
      byte[] header = new byte[HEADER_BYTES];
      while (true) {
        Object next;
        try {
          next = queue.take();
        } catch (InterruptedException e) {
          return;
        }
        if (next == STOP) {
          return;
        }
        SendJob job = (SendJob) next;
        if (!job.state.compareAndSet(SendJob.QUEUED, SendJob.WRITING)) {
          continue;
        }
        try {
          awaitAttached(job.deadline, "waiting for rank " + peer + " to connect (" + job.tag + ")");
        } catch (RuntimeException e) {
          job.finish(SendJob.FAILED, e.getMessage());
          continue;
        }
        writeLock.lock();
        try {
          header[0] = DATA;
          header[1] = (byte) job.tag.channel().ordinal();
          header[2] = (byte) job.tag.op().ordinal();
          putLong(header, 3, job.tag.seq());
          putLong(header, 11, job.bytes);
          OutputStream o = out;
          o.write(header);
          for (long off = 0; off < job.bytes; ) {
            int part = (int) Math.min(CHUNK, job.bytes - off);
            NativeMemory.copyToArray(job.src + off, buf, 0, part);
            o.write(buf, 0, part);
            off += part;
          }
          o.flush();
          job.finish(SendJob.DONE, null);
        } catch (IOException e) {
          job.finish(SendJob.FAILED, "connection to rank " + peer + " failed while sending " + job.tag + ": "
              + e.getMessage());
        } catch (RuntimeException e) {
          job.finish(SendJob.FAILED, e.getMessage());
        } finally {
          writeLock.unlock();
        }
      }
    }

    /**
     * Sends an abort frame naming the root cause, unless a data frame is being written (then only
     * closing is safe), and stops the connection.
     */
    void abort(byte kind, int root, byte[] text) {
      Socket s = socket;
      queue.add(STOP);
      if (s == null) {
        return;
      }
      boolean locked = false;
      try {
        locked = writeLock.tryLock(100, TimeUnit.MILLISECONDS);
        if (locked) {
          byte[] frame = new byte[9 + Math.min(text.length, 1 << 16)];
          frame[0] = kind;
          putLong(frame, 1, ((long) root << 32) | (frame.length - 9));
          System.arraycopy(text, 0, frame, 9, frame.length - 9);
          OutputStream o = out;
          o.write(frame);
          o.flush();
          s.shutdownOutput();
        } else {
          s.close();
        }
      } catch (IOException e) {
        // the peer is gone already
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      } finally {
        if (locked) {
          writeLock.unlock();
        }
      }
    }

    void close() {
      queue.add(STOP);
      Socket s = socket;
      if (s != null) {
        try {
          s.close();
        } catch (IOException e) {
          // closing anyway
        }
      }
      synchronized (lock) {
        lostReason = lostReason == null ? "transport closed" : lostReason;
        lock.notifyAll();
      }
    }
  }

  private static final Object STOP = new Object();

  /** A posted send: queued for its connection's writer thread. */
  private final class SendJob implements PendingSend {
    static final int QUEUED = 0;
    static final int WRITING = 1;
    static final int DONE = 2;
    static final int FAILED = 3;
    static final int CANCELLED = 4;

    final Tag tag;
    final long src;
    final long bytes;
    final Conn conn;
    final long deadline;
    final Thread owner = Thread.currentThread();
    final AtomicInteger state = new AtomicInteger(QUEUED);
    volatile String error;

    SendJob(Tag tag, long src, long bytes, Conn conn, long deadline) {
      this.tag = tag;
      this.src = src;
      this.bytes = bytes;
      this.conn = conn;
      this.deadline = deadline;
    }

    void finish(int s, String err) {
      error = err;
      state.set(s);
      LockSupport.unpark(owner);
    }

    @Override
    public void await() {
      int s;
      while ((s = state.get()) == QUEUED || s == WRITING) {
        checkFailed();
        if (System.nanoTime() - deadline > 0) {
          throw new TransportTimeoutException("waiting for rank " + conn.peer + " to take " + tag);
        }
        LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(Math.min(POLL_MS, 1)));
      }
      if (s == FAILED) {
        // A failure already recorded (a peer's abort frame, a timeout) is the cause, not this connection.
        checkFailed();
        throw conn.lost(error);
      }
    }

    @Override
    public void cancel() {
      if (state.compareAndSet(QUEUED, CANCELLED)) {
        return;
      }
      if (state.get() == WRITING) {
        // The writer is reading our memory; closing the socket stops it within one write.
        conn.close();
        long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
        while (state.get() == WRITING && System.nanoTime() - until < 0) {
          LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(1));
        }
      }
    }
  }
}
