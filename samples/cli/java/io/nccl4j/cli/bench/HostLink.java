package io.nccl4j.cli.bench;

import io.nccl4j.ObjectCodec;
import io.nccl4j.ProcessGroup;
import io.nccl4j.launch.DistEnv;
import io.nccl4j.launch.ProcessGroups;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.EOFException;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.BindException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.security.MessageDigest;
import java.security.SecureRandom;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HexFormat;
import java.util.List;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicReference;

/**
 * The bound of launched ranks on several hosts: the bandwidth of the link between two of them,
 * measured by raw TCP streams from the group's rank 0 to the first rank of another host — not through
 * nccl4j's collectives, whose own costs a bound must not contain.
 *
 * <p>Collective over the sweep's group, after the run. Every rank all-gathers its host identity
 * ({@link ProcessGroups#hostIdentity()}: what decides whether processes share memory), so every
 * rank reaches the same verdict. On one host every rank returns null at once. Across hosts the chosen
 * rank listens where its transport is reached ({@link ProcessGroups#advertisedAddress}) and
 * broadcasts the address with a one-time token (a stray connection to the port is not counted);
 * rank 0 sends {@link #BYTES} on 1 and then on several connections at once, keeping the better
 * count, then on that many with the other end sending as much back at the same time, {@link #BOTH_ROUNDS}
 * times, keeping the best (a bound is the most the link was seen to carry: one round on shared cores
 * measured anything from 1.3 to 1.9 GB/s on a veth pair here); every other rank returns at once.
 * The two that measure give up after the group's timeout.
 *
 * <p>The bound is the rate each way with both ways busy: a hierarchical AllReduce sends as much
 * into each host as out of it, at once. On a full-duplex NIC that is the one-way rate; where the
 * "link" is CPU — a veth pair between network namespaces, whose both ends share the machine's cores —
 * it can be half of it, and a bound from the one-way rate would be one no AllReduce could reach.
 */
public final class HostLink {
  /** Bytes per connection: enough that the connection's start and the closing acknowledgement are noise. */
  static final long BYTES = 256L << 20;
  /** Rounds both ways, of which the best is the bound. */
  static final int BOTH_ROUNDS = 3;
  private static final int TOKEN_BYTES = 16;
  private static final int SOCKET_BUFFER = 4 << 20;

  private HostLink() {}

  /**
   * Collective: the bound, on the group's rank 0, when the group's ranks are on several hosts; null
   * on every other rank, and on every rank when they are all on one host. Must run under the launcher.
   */
  public static AllReduceBound measure(ProcessGroup pg) {
    DistEnv env = DistEnv.fromEnvironment();
    Duration timeout = pg.timeout();
    List<String> entries = pg.allGatherObject(env.rank() + "\n" + ProcessGroups.hostIdentity(), ObjectCodec.utf8());
    int[] worldRanks = new int[entries.size()];
    String[] hosts = new String[entries.size()];
    for (int i = 0; i < entries.size(); i++) {
      String[] parts = entries.get(i).split("\n", 2);
      worldRanks[i] = Integer.parseInt(parts[0]);
      hosts[i] = parts[1];
    }
    int hostCount = (int) java.util.Arrays.stream(hosts).distinct().count();
    if (hostCount < 2) {
      return null;
    }
    int peer = 1;
    while (hosts[peer].equals(hosts[0])) {
      peer++;
    }
    int local = (int) java.util.Arrays.stream(hosts).filter(hosts[0]::equals).count();
    // Each rank of a host could drive a connection of its own across the link, as NCCL runs one ring
    // per channel; at least a few, since one TCP stream rarely fills a fast link.
    int streams = Math.max(4, local);

    ServerSocket server = null;
    byte[] token = null;
    String offer = null;
    if (pg.rank() == peer) {
      token = new byte[TOKEN_BYTES];
      new SecureRandom().nextBytes(token);
      String address = ProcessGroups.advertisedAddress(env);
      try {
        server = listen(address);
        offer = address + " " + server.getLocalPort() + " " + HexFormat.of().formatHex(token);
      } catch (IOException | RuntimeException e) {
        offer = "none: rank " + env.rank() + " cannot listen on " + address + " for the link measurement: " + e;
      }
    }
    String got = pg.broadcastObjectList(Collections.singletonList(offer), peer, ObjectCodec.utf8()).get(0);
    if (pg.rank() == peer) {
      if (server != null) {
        // Rounds: 1 stream, `streams` streams, then BOTH_ROUNDS of the better of the two both ways (its count sent first).
        serve(server, token, timeout, env.rank(), worldRanks[0]);
      }
      return null;
    }
    if (pg.rank() != 0) {
      return null;
    }
    if (got.startsWith("none:")) {
      throw new SampleException(1, "rank " + env.rank() + ": no bound: " + got.substring("none: ".length()));
    }
    String[] f = got.split(" ");
    String host = f[0];
    int port = Integer.parseInt(f[1]);
    byte[] key = HexFormat.of().parseHex(f[2]);
    try {
      Run one = send(host, port, key, 1, false, timeout);
      Run many = send(host, port, key, streams, false, timeout);
      int n = many.rate() > one.rate() ? streams : 1;
      Run oneWay = n == 1 ? one : many;
      Run both = null;
      for (int round = 0; round < BOTH_ROUNDS; round++) {
        Run r = send(host, port, key, n, true, timeout);
        both = both == null || r.rate() > both.rate() ? r : both;
      }
      String between = String.format("rank %d at %s and rank %d at %s", env.rank(), one.from(), worldRanks[peer], host);
      Bounds.Bandwidth b = new Bounds.Bandwidth(both.rate(), String.format(java.util.Locale.ROOT,
          "each way with both ways busy, best of %d rounds: %d TCP stream%s each way between hosts, %s, %s each;"
          + " one way alone %.2f GB/s", BOTH_ROUNDS, n, n == 1 ? "" : "s", between, Sizes.format(BYTES),
          oneWay.rate() / 1e9), false);
      return new AllReduceBound(b, hostCount);
    } catch (IOException e) {
      throw new SampleException(1, "rank " + env.rank() + ": cannot measure the link to rank " + worldRanks[peer]
          + " at " + host + ":" + port + ": " + e.getMessage());
    }
  }

  /** A measured rate, bytes per second, and the local address it left from. */
  private record Run(double rate, String from) {}

  private static ServerSocket listen(String address) throws IOException {
    InetAddress a = InetAddress.getByName(address);
    ServerSocket s = java.nio.channels.ServerSocketChannel.open().socket(); // channels: DirectTransfer
    s.setReceiveBufferSize(SOCKET_BUFFER); // before bind, so that the window can open past 64 KiB
    try {
      s.bind(new InetSocketAddress(a, 0), 16);
      return s;
    } catch (BindException e) {
      // An advertised address that is not this machine's (behind a NAT): every interface, as the transport does.
      s.close();
      ServerSocket any = java.nio.channels.ServerSocketChannel.open().socket();
      any.setReceiveBufferSize(SOCKET_BUFFER);
      any.bind(new InetSocketAddress(0), 16);
      return any;
    }
  }

  /**
   * {@code streams} connections each sending {@link #BYTES} (and, {@code both}, receiving as many sent
   * back at the same time); the clock runs from the moment all are open and announced until the
   * receiver has acknowledged the last byte of every one and, {@code both}, the last byte back has
   * arrived. The rate is one way's.
   */
  private static Run send(String host, int port, byte[] token, int streams, boolean both, Duration timeout)
      throws IOException {
    int ms = millis(timeout);
    List<Socket> sockets = new ArrayList<>();
    ExecutorService pool = Executors.newFixedThreadPool(streams, r -> {
      Thread t = new Thread(r, "link-sender");
      t.setDaemon(true);
      return t;
    });
    try {
      for (int i = 0; i < streams; i++) {
        Socket s = java.nio.channels.SocketChannel.open().socket();
        sockets.add(s);
        s.setSendBufferSize(SOCKET_BUFFER);
        s.setTcpNoDelay(true);
        s.setSoTimeout(ms);
        s.connect(new InetSocketAddress(host, port), ms);
        DataOutputStream out = new DataOutputStream(s.getOutputStream());
        out.write(token);
        out.writeLong(BYTES);
        out.writeBoolean(both);
        out.writeInt(streams);
        out.flush();
      }
      // The barrier's action reads the clock: the last sender to arrive reads it before any is released.
      long[] start = new long[1];
      CyclicBarrier go = new CyclicBarrier(streams, () -> start[0] = System.nanoTime());
      List<Future<Long>> ends = new ArrayList<>();
      for (Socket s : sockets) {
        ends.add(pool.submit(() -> {
          InputStream in = s.getInputStream();
          go.await(ms, TimeUnit.MILLISECONDS);
          AtomicReference<IOException> back = new AtomicReference<>();
          Thread reader = null;
          if (both) {
            reader = new Thread(() -> drainOnly(s, BYTES, back), "link-back");
            reader.setDaemon(true);
            reader.start();
          }
          DirectTransfer.send(s, BYTES);
          if (reader != null) {
            reader.join();
            if (back.get() != null) {
              throw back.get();
            }
          }
          if (in.read() != 1) {
            throw new EOFException("the receiver closed the connection before acknowledging " + BYTES + " bytes");
          }
          return System.nanoTime();
        }));
      }
      long deadline = System.nanoTime() + timeout.toNanos();
      long end = 0;
      for (Future<Long> f : ends) {
        end = Math.max(end, f.get(Math.max(0, deadline - System.nanoTime()), TimeUnit.NANOSECONDS));
      }
      return new Run((double) BYTES * streams / ((end - start[0]) / 1e9), sockets.get(0).getLocalAddress()
          .getHostAddress());
    } catch (TimeoutException e) {
      throw new IOException("not done within " + timeout.toSeconds() + " s");
    } catch (ExecutionException e) {
      throw e.getCause() instanceof IOException io ? io : new IOException(e.getCause().toString(), e.getCause());
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IOException("interrupted", e);
    } finally {
      for (Socket s : sockets) {
        s.close(); // also ends a sender blocked in write
      }
      pool.shutdownNow();
    }
  }

  /**
   * Accepts connections announced with {@code token} and reads each to its end on a thread of its own
   * (the connections of one round run at once), sending as much back meanwhile when the connection
   * asks for both ways, and acknowledging each with one byte; done once the both-ways rounds (the
   * last {@link #BOTH_ROUNDS}) have had all their connections.
   */
  private static void serve(ServerSocket server, byte[] token, Duration timeout, int me, int sender) {
    int ms = millis(timeout);
    long deadline = System.nanoTime() + timeout.toNanos();
    List<Thread> readers = new ArrayList<>();
    List<Socket> accepted = new ArrayList<>();
    AtomicReference<IOException> failure = new AtomicReference<>();
    try (server) {
      int bothWays = 0;
      int lastRound = Integer.MAX_VALUE;
      while (bothWays < lastRound) {
        long left = TimeUnit.NANOSECONDS.toMillis(deadline - System.nanoTime());
        if (left <= 0) {
          throw new SocketTimeoutException();
        }
        server.setSoTimeout((int) Math.min(Integer.MAX_VALUE, left));
        Socket s = server.accept();
        long bytes;
        boolean both;
        int streams;
        try {
          s.setSoTimeout(ms);
          DataInputStream in = new DataInputStream(s.getInputStream());
          byte[] got = new byte[TOKEN_BYTES];
          in.readFully(got);
          bytes = in.readLong();
          both = in.readBoolean();
          streams = in.readInt();
          if (!MessageDigest.isEqual(got, token) || bytes < 0 || bytes > BYTES || streams < 1 || streams > 1024) {
            s.close();
            continue;
          }
        } catch (IOException e) {
          s.close();
          continue;
        }
        if (both) {
          bothWays++;
          lastRound = streams * BOTH_ROUNDS; // both-ways connections in all
        }
        long n = bytes;
        Thread t = new Thread(() -> answer(s, n, both, failure), "link-receiver");
        t.setDaemon(true);
        t.start();
        readers.add(t);
        accepted.add(s);
      }
    } catch (SocketTimeoutException e) {
      throw new SampleException(1, "rank " + me + ": rank " + sender + " did not open its connections for the link"
          + " measurement within " + timeout.toSeconds() + " s");
    } catch (IOException e) {
      throw new SampleException(1, "rank " + me + ": link measurement: " + e);
    }
    for (Thread t : readers) {
      try {
        // The channels' reads have no time limit of their own: past the deadline, closing the sockets ends them.
        t.join(Math.max(1, TimeUnit.NANOSECONDS.toMillis(deadline - System.nanoTime())));
        if (t.isAlive()) {
          for (Socket s : accepted) {
            closeQuietly(s);
          }
          throw new SampleException(1, "rank " + me + ": rank " + sender + "'s link measurement did not end within "
              + timeout.toSeconds() + " s");
        }
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new SampleException(1, "rank " + me + ": interrupted during the link measurement");
      }
    }
    if (failure.get() != null) {
      throw new SampleException(1, "rank " + me + ": link measurement from rank " + sender + " failed: "
          + failure.get());
    }
  }

  /** Reads {@code bytes} from {@code s} (sending as many back meanwhile, {@code both}), then acknowledges. */
  private static void answer(Socket s, long bytes, boolean both, AtomicReference<IOException> failure) {
    try (s) {
      OutputStream out = s.getOutputStream();
      AtomicReference<IOException> back = new AtomicReference<>();
      Thread writer = null;
      if (both) {
        writer = new Thread(() -> {
          try {
            DirectTransfer.send(s, bytes);
          } catch (IOException e) {
            back.set(e);
          }
        }, "link-back-sender");
        writer.setDaemon(true);
        writer.start();
      }
      drainOnly(s, bytes, failure);
      if (writer != null) {
        writer.join();
        if (back.get() != null) {
          throw back.get();
        }
      }
      out.write(1); // after the bytes sent back, on the same stream
      out.flush();
    } catch (IOException e) {
      failure.compareAndSet(null, e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  /** Reads {@code bytes} from {@code s}, or records why it could not. */
  private static void drainOnly(Socket s, long bytes, AtomicReference<IOException> failure) {
    try {
      DirectTransfer.receive(s, bytes);
    } catch (IOException e) {
      failure.compareAndSet(null, e);
    }
  }

  private static void closeQuietly(Socket s) {
    try {
      s.close();
    } catch (IOException e) {
      // closing anyway
    }
  }

  private static int millis(Duration d) {
    return (int) Math.max(1, Math.min(Integer.MAX_VALUE, d.toMillis()));
  }
}
