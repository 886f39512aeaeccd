package io.nccl4j.internal.transport.shm;

import io.nccl4j.internal.bind.cpu.CpuKernels;
import io.nccl4j.memory.DirectBuffers;
import io.nccl4j.memory.NativeMemory;
import java.nio.ByteBuffer;

/**
 * Whether memory a window between processes is about to touch can still be read, asked of the kernel through
 * nccl4j's CPU kernel library (native/jni/cpu/nccl4j_cpu_shm.h): one system call for all the addresses, which
 * answers "gone" for a page a truncation removed where an access would fault. The native kernels must never meet
 * such a page (SIGBUS in native code ends the JVM), so a window probes before they run. Without the library there
 * are no native kernels, and the JVM turns a fault in Java code into an {@code InternalError}: nothing needs to ask
 * ({@link #available()} false).
 */
final class ShmProbe {
  /** The most addresses one system call probes; more are probed in turns. */
  private static final int MAX = 64;
  private static final boolean AVAILABLE = load();

  private ShmProbe() {}

  private static boolean load() {
    try {
      // A probe of memory of this process's own proves the symbol and that the kernel lets the probe run here.
      ByteBuffer b = ByteBuffer.allocateDirect(16);
      long table = DirectBuffers.address(b);
      NativeMemory.putLong(table, table + 8);
      return CpuKernels.nccl4j_readable(table, 1) == 1;
    } catch (Throwable e) {
      return false;
    }
  }

  static boolean available() {
    return AVAILABLE;
  }

  /**
   * How many of the {@code count} addresses in the native table at {@code table} can be read, in order: {@code count}
   * when all can, else the index of the first that cannot; -1 when the probe could not run (the caller checks the
   * files' sizes instead).
   */
  static int readable(long table, int count) {
    for (int done = 0; done < count; done += MAX) {
      int k = Math.min(MAX, count - done);
      int r = CpuKernels.nccl4j_readable(table + 8L * done, k);
      if (r < 0) {
        return -1;
      }
      if (r < k) {
        return done + r;
      }
    }
    return count;
  }
}
