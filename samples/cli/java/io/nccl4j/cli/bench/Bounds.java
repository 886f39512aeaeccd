package io.nccl4j.cli.bench;

import io.nccl4j.memory.NativeMemory;
import java.io.IOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.util.ArrayList;
import java.util.List;
import java.util.TreeSet;
import java.util.concurrent.CyclicBarrier;

/**
 * Physical limits measured on this machine in the same run as a benchmark, so that a figure can be
 * put next to the fastest it could possibly be.
 *
 * <ul>
 *   <li>Memory bandwidth, STREAM's convention: bytes read plus bytes written per second by large
 *       copies, the best of one thread, one thread per core and {@code threads} concurrent threads. An AllReduce of S
 *       bytes on p ranks that share memory reads every input once and writes every output once:
 *       t ≥ 2·p·S / B.</li>
 *   <li>Loopback bandwidth: bytes per second through TCP sockets on 127.0.0.1, the best of one and
 *       {@code streams} concurrent connections, {@code reps} times each, between direct buffers and the
 *       kernel (no copy in user space, as nccl4j's transport moves its payloads: {@link DirectTransfer}).
 *       A ring AllReduce sends 2·(p−1)·S bytes in all: t ≥ 2·(p−1)·S / B.</li>
 * </ul>
 *
 * <p>The link between hosts is measured by {@link HostLink}: it needs a rank on each end.
 */
public final class Bounds {
  private Bounds() {}

  /**
   * A measured bandwidth, bytes per second, and how it was measured; {@code memory} for a memory
   * copy, false for TCP ({@link AllReduceBound} says what an AllReduce moves through each).
   */
  public record Bandwidth(double bytesPerSecond, String how, boolean memory) {
    public double gbps() {
      return bytesPerSecond / 1e9;
    }

    /** Seconds to move {@code bytes} at this bandwidth, in microseconds. */
    double micros(double bytes) {
      return bytes / bytesPerSecond * 1e6;
    }
  }

  /**
   * Best of 1 thread, one per core, and {@code threads} threads copying {@code bytesPerThread}
   * each, {@code reps} times: ranks that outnumber the cores share them, and a copy with more
   * threads than cores measures the time-slicing as much as the memory.
   */
  public static Bandwidth memory(int threads, long bytesPerThread, int reps) {
    int cores = Runtime.getRuntime().availableProcessors();
    TreeSet<Integer> counts = new TreeSet<>(List.of(1, Math.max(1, Math.min(threads, cores)), threads));
    double best = 0;
    int bestCount = 1;
    for (int n : counts) {
      double rate = copyRate(n, bytesPerThread, reps);
      if (rate > best) {
        best = rate;
        bestCount = n;
      }
    }
    return bestCount == 1
        ? new Bandwidth(best, String.format("1 thread copying %s, read+write", Sizes.format(bytesPerThread)), true)
        : new Bandwidth(best, String.format("%d threads copying %s each, read+write", bestCount,
            Sizes.format(bytesPerThread)), true);
  }

  private static double copyRate(int threads, long bytes, int reps) {
    long[] src = new long[threads];
    long[] dst = new long[threads];
    try {
      for (int i = 0; i < threads; i++) {
        src[i] = NativeMemory.allocate(bytes);
        dst[i] = NativeMemory.allocate(bytes);
        NativeMemory.fill(src[i], bytes, (byte) (i + 1));
        NativeMemory.fill(dst[i], bytes, (byte) 0); // touch every page before timing
      }
      double best = 0;
      for (int rep = 0; rep < reps; rep++) {
        // The clock is read by the barriers' actions: the thread that trips a barrier reads it before
        // anyone is released, so a descheduled main thread cannot shorten the interval.
        long[] clock = new long[2];
        CyclicBarrier start = new CyclicBarrier(threads + 1, () -> clock[0] = System.nanoTime());
        CyclicBarrier end = new CyclicBarrier(threads + 1, () -> clock[1] = System.nanoTime());
        List<Thread> ts = new ArrayList<>();
        for (int i = 0; i < threads; i++) {
          final int k = i;
          Thread t = new Thread(() -> {
            await(start);
            NativeMemory.copy(src[k], dst[k], bytes);
            await(end);
          });
          t.start();
          ts.add(t);
        }
        await(start);
        await(end);
        for (Thread t : ts) {
          join(t);
        }
        long ns = clock[1] - clock[0];
        best = Math.max(best, 2.0 * bytes * threads / (ns / 1e9));
      }
      return best;
    } finally {
      for (int i = 0; i < threads; i++) {
        if (src[i] != 0) {
          NativeMemory.free(src[i]);
        }
        if (dst[i] != 0) {
          NativeMemory.free(dst[i]);
        }
      }
    }
  }

  /**
   * Best of 1 and {@code streams} concurrent loopback connections, each sending {@code bytes}, {@code reps}
   * times each: on shared cores one run of 4 streams measured anything from 3.5 to 4.5 GB/s here.
   */
  public static Bandwidth loopback(int streams, long bytes, int reps) throws IOException {
    double one = 0;
    double many = 0;
    for (int rep = 0; rep < reps; rep++) {
      one = Math.max(one, loopbackRate(1, bytes));
      many = streams > 1 ? Math.max(many, loopbackRate(streams, bytes)) : 0;
    }
    return many > one
        ? new Bandwidth(many, String.format("%d TCP streams on 127.0.0.1, %s each", streams, Sizes.format(bytes)), false)
        : new Bandwidth(one, String.format("1 TCP stream on 127.0.0.1, %s", Sizes.format(bytes)), false);
  }

  private static double loopbackRate(int streams, long bytes) throws IOException {
    // From channels, so that the bytes go between direct buffers and the kernel (DirectTransfer).
    try (ServerSocket server = java.nio.channels.ServerSocketChannel.open().socket()) {
      server.bind(new java.net.InetSocketAddress(InetAddress.getLoopbackAddress(), 0), streams);
      List<Socket> senders = new ArrayList<>();
      List<Socket> receivers = new ArrayList<>();
      try {
        for (int i = 0; i < streams; i++) {
          Socket s = java.nio.channels.SocketChannel.open().socket();
          s.connect(new java.net.InetSocketAddress(InetAddress.getLoopbackAddress(), server.getLocalPort()));
          s.setTcpNoDelay(true);
          s.setSendBufferSize(4 << 20);
          senders.add(s);
          Socket r = server.accept();
          r.setReceiveBufferSize(4 << 20);
          receivers.add(r);
        }
        long[] clock = new long[2];
        CyclicBarrier start = new CyclicBarrier(2 * streams + 1, () -> clock[0] = System.nanoTime());
        CyclicBarrier end = new CyclicBarrier(2 * streams + 1, () -> clock[1] = System.nanoTime());
        List<Thread> ts = new ArrayList<>();
        for (int i = 0; i < streams; i++) {
          Socket s = senders.get(i);
          Socket r = receivers.get(i);
          ts.add(new Thread(() -> {
            await(start);
            try (s) {
              DirectTransfer.send(s, bytes);
            } catch (IOException e) {
              throw new IllegalStateException("loopback sender: " + e.getMessage(), e);
            }
            await(end);
          }));
          ts.add(new Thread(() -> {
            await(start);
            try (r) {
              DirectTransfer.receive(r, bytes);
            } catch (IOException e) {
              throw new IllegalStateException("loopback receiver: " + e.getMessage(), e);
            }
            await(end);
          }));
        }
        ts.forEach(Thread::start);
        await(start);
        await(end);
        ts.forEach(Bounds::join);
        long ns = clock[1] - clock[0];
        return (double) bytes * streams / (ns / 1e9);
      } finally {
        for (Socket s : senders) {
          s.close();
        }
        for (Socket s : receivers) {
          s.close();
        }
      }
    }
  }

  private static void await(CyclicBarrier b) {
    try {
      b.await();
    } catch (Exception e) {
      throw new IllegalStateException("bandwidth measurement interrupted", e);
    }
  }

  private static void join(Thread t) {
    try {
      t.join();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException("interrupted", e);
    }
  }
}
