package io.nccl4j.internal.bind.cpu;

import org.bytedeco.javacpp.Loader;
import org.bytedeco.javacpp.annotation.Cast;
import org.bytedeco.javacpp.annotation.Platform;

/**
 * nccl4j's own JavaCPP preset for the CPU backend's native helpers: the reduction and copy kernels
 * (native/jni/cpu/nccl4j_cpu_kernels.h: one pass that reads every source and writes every destination,
 * vectorised, AVX2 where the CPU has it), the futex between processes (nccl4j_cpu_futex.h), the probe of
 * shared memory before a window touches it (nccl4j_cpu_shm.h) and the TCP transport's sockets
 * (nccl4j_cpu_socket.h). Needs no CUDA; built by the normal Maven build with the system's C++ compiler. The CPU
 * backend uses it through {@code io.nccl4j.cpu.NativeKernels}, which falls back to Java when this library is absent.
 */
@Platform(value = "linux-x86_64", include = {"nccl4j_cpu_kernels.h", "nccl4j_cpu_futex.h", "nccl4j_cpu_shm.h",
    "nccl4j_cpu_socket.h"})
public final class CpuKernels {
  static {
    Loader.load();
  }

  private CpuKernels() {}

  /** {@link #nccl4j_reduce} flag: a single destination of at least {@link #nccl4j_stream_min_bytes} may stream. */
  public static final int STREAM_LARGE = 1;
  /** {@link #nccl4j_reduce} flag: up to two destinations of any size may stream (pieces of large outputs). */
  public static final int STREAM_PIECES = 2;

  /**
   * {@code dst[d][i] = src[0][i] op src[1][i] op … } for every destination d and element i;
   * {@code sources} and {@code destinations} are native tables of addresses; {@code flags} 0 stores
   * every destination normally, {@link #STREAM_LARGE} and {@link #STREAM_PIECES} allow streaming stores
   * (to destinations that overlap no source). Returns 1 when the destinations were written with
   * streaming stores, 0 when normally, or -1 for an unknown op or a count out of range (nothing is
   * touched then).
   */
  public static native int nccl4j_reduce(int op, @Cast("const void* const*") long sources, int sourceCount,
      @Cast("void* const*") long destinations, int destinationCount, @Cast("size_t") long count, int flags);

  /**
   * Copies {@code bytes} from {@code src} to {@code dst}: with streaming stores when {@code stream} is not 0,
   * there are at least {@link #nccl4j_stream_min_bytes} and the two do not overlap (returns 1), else as memmove
   * (returns 0).
   */
  public static native int nccl4j_copy(@Cast("void*") long dst, @Cast("const void*") long src,
      @Cast("size_t") long bytes, int stream);

  /** The least bytes per destination the kernels write with streaming stores; -1 where they never do. */
  public static native long nccl4j_stream_min_bytes();

  /** The instruction set the kernels use on this CPU: "avx2" or "baseline". */
  public static native @Cast("const char*") String nccl4j_cpu_kernels_isa();

  /**
   * Sleeps while the 32-bit word at {@code address} (in memory several processes map) holds
   * {@code expected}, for at most {@code timeoutNanos}, until {@link #nccl4j_futex_wake}; 0 when woken,
   * -1 otherwise (re-check the condition).
   */
  public static native int nccl4j_futex_wait(@Cast("void*") long address, int expected, long timeoutNanos);

  /** Wakes every process sleeping on the word at {@code address}; how many, or -1. */
  public static native int nccl4j_futex_wake(@Cast("void*") long address);

  /**
   * How many of the bytes at the {@code count} addresses of the native table {@code addresses} can be read, in order,
   * asked of the kernel so that a page that is gone (a shared file truncated under its mapping) is an answer, not
   * SIGBUS: {@code count} when all can, else the index of the first that cannot; -2 - errno when the probe cannot run
   * (at most 64 addresses).
   */
  public static native int nccl4j_readable(@Cast("const void* const*") long addresses, int count);

  /**
   * A duplicate of this process's TCP socket from the local address at {@code addresses} (16 bytes, IPv4 as
   * ::ffff:a.b.c.d), port {@code localPort}, to the peer whose address follows it, port {@code peerPort}; -1 when
   * there is none.
   */
  public static native int nccl4j_socket_dup(@Cast("const void*") long addresses, int localPort, int peerPort);

  /** Receives up to {@code len} bytes: how many, 0 at the end of the stream, -1 when none came in time, -2 - errno. */
  public static native long nccl4j_socket_recv(int fd, @Cast("void*") long dst, long len, int timeoutMs);

  /** Sends up to {@code len} bytes: how many, -1 when no room came in time, -2 - errno. */
  public static native long nccl4j_socket_send(int fd, @Cast("const void*") long src, long len, int timeoutMs);

  /** Closes a descriptor {@link #nccl4j_socket_dup} returned: 0 or -errno. */
  public static native int nccl4j_socket_close(int fd);

  /** The text of an errno value. */
  public static native @Cast("const char*") String nccl4j_strerror(int err);
}
