package io.nccl4j.internal.transport.tcp;

import io.nccl4j.Settings;
import io.nccl4j.internal.bind.cpu.CpuKernels;
import io.nccl4j.memory.NativeMemory;
import java.io.IOException;
import java.net.Inet4Address;
import java.net.InetAddress;
import java.net.Socket;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * A {@link TcpConnection}'s payloads straight between native memory and the kernel, through nccl4j's CPU kernel
 * library: the JDK's socket streams copy each byte through a heap array and a temporary direct buffer on either
 * side, four copies per byte that crosses, and the transport's large collectives are bound by the cores that make
 * them (docs/PERFORMANCE.md §3c). The frames' headers still go through the socket's streams: this carries only the
 * payload bytes that follow a header, in the same order on the same socket.
 *
 * <p>It holds a duplicate of the socket's descriptor of its own, found by the socket's addresses and ports (only
 * that descriptor is duplicated: closing any other, even a duplicate, would drop the process's locks on its file), so
 * that the JDK closing its descriptor never leaves this reading or writing a number the process has reused. The
 * JDK's close shuts the socket's output down first (its linger is not 0), so the peer sees the end of the stream
 * then, as without this, and calls here fail; the socket is released when {@link #close} closed the duplicate too,
 * which it does once no call is inside it (calls wait in slices of at most {@link #SLICE_MS}, so that one comes out
 * within that). Absent — {@link #of} returns null and
 * the streams carry everything — without the library, off Linux, or with {@code NCCL4J_TCP_NATIVE=0}.
 */
final class NativeSocket {
  /** The longest a call waits in the kernel before it looks whether the socket is closing. */
  static final int SLICE_MS = 20;
  private static final boolean AVAILABLE = load();

  private final int fd;
  private final AtomicInteger inside = new AtomicInteger();
  private volatile boolean closing;
  private final AtomicBoolean closed = new AtomicBoolean();

  private NativeSocket(int fd) {
    this.fd = fd;
  }

  private static boolean load() {
    String env = Settings.NCCL4J_TCP_NATIVE.get();
    if ("0".equals(env) || "0".equals(Settings.TCP_NATIVE_PROPERTY.get())) {
      return false;
    }
    try {
      CpuKernels.nccl4j_socket_close(-1); // proves the symbols: EBADF, nothing closed
      return true;
    } catch (Throwable e) {
      return false;
    }
  }

  static boolean available() {
    return AVAILABLE;
  }

  /** The payload path of connected socket {@code s}, or null: the streams then carry everything. */
  static NativeSocket of(Socket s) {
    if (!AVAILABLE || !s.isConnected()) {
      return null;
    }
    byte[] addresses = new byte[32];
    mapped(s.getLocalAddress(), addresses, 0);
    mapped(s.getInetAddress(), addresses, 16);
    long buf = NativeMemory.allocate(addresses.length);
    try {
      NativeMemory.copyFromArray(addresses, 0, buf, addresses.length);
      int fd = CpuKernels.nccl4j_socket_dup(buf, s.getLocalPort(), s.getPort());
      return fd < 0 ? null : new NativeSocket(fd);
    } finally {
      NativeMemory.free(buf);
    }
  }

  /** {@code a}'s 16-byte IPv6 form (IPv4 as ::ffff:a.b.c.d) at {@code out[at]}, as the kernel library compares it. */
  private static void mapped(InetAddress a, byte[] out, int at) {
    byte[] b = a.getAddress();
    if (a instanceof Inet4Address) {
      out[at + 10] = (byte) 0xff;
      out[at + 11] = (byte) 0xff;
      System.arraycopy(b, 0, out, at + 12, 4);
    } else {
      System.arraycopy(b, 0, out, at, 16);
    }
  }

  /**
   * Receives up to {@code len} bytes into {@code dst}, waiting at most {@link #SLICE_MS} for some: how many, 0 when
   * none came in that time.
   *
   * @throws java.io.EOFException at the end of the stream
   * @throws IOException when the socket failed or is closing
   */
  int read(long dst, long len) throws IOException {
    enter();
    try {
      long n = CpuKernels.nccl4j_socket_recv(fd, dst, Math.min(len, Integer.MAX_VALUE), SLICE_MS);
      if (n == 0) {
        throw new java.io.EOFException("end of stream");
      }
      return (int) checked(n);
    } finally {
      exit();
    }
  }

  /**
   * Sends up to {@code len} bytes from {@code src}, waiting at most {@link #SLICE_MS} for room: how many, 0 when
   * no room came in that time.
   *
   * @throws IOException when the socket failed or is closing
   */
  int write(long src, long len) throws IOException {
    enter();
    try {
      return (int) checked(CpuKernels.nccl4j_socket_send(fd, src, Math.min(len, Integer.MAX_VALUE), SLICE_MS));
    } finally {
      exit();
    }
  }

  private static long checked(long n) throws IOException {
    if (n >= 0) {
      return n;
    }
    if (n == -1) {
      return 0;
    }
    int errno = (int) (-2 - n);
    throw new IOException(CpuKernels.nccl4j_strerror(errno) + " (errno " + errno + ")");
  }

  private void enter() throws IOException {
    inside.incrementAndGet();
    if (closing) {
      exit();
      throw new java.net.SocketException("Socket closed");
    }
  }

  private void exit() {
    if (inside.decrementAndGet() == 0 && closing) {
      closeNow();
    }
  }

  /**
   * Closes the duplicate now, or when the call inside it comes out (within {@link #SLICE_MS}); every later call
   * fails. The socket ends when the JDK's descriptor is closed too.
   */
  void close() {
    closing = true;
    if (inside.get() == 0) {
      closeNow();
    }
  }

  private void closeNow() {
    if (closed.compareAndSet(false, true)) {
      CpuKernels.nccl4j_socket_close(fd);
    }
  }
}
