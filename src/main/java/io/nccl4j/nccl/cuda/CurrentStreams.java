package io.nccl4j.nccl.cuda;

/**
 * Each thread's current CUDA stream per device (PyTorch's {@code torch.cuda.current_stream()}: per
 * thread and device), 0 — the legacy default stream — until set. Tensor copies and fills of device
 * memory are ordered on it (the device memory of {@code io.nccl4j.nccl}), so that they follow the kernels the thread queued
 * there instead of relying on the legacy stream's implicit synchronisation, which non-blocking
 * streams do not take part in.
 */
public final class CurrentStreams {
  private static final ThreadLocal<long[]> CURRENT = ThreadLocal.withInitial(() -> new long[8]);

  private CurrentStreams() {}

  /** The calling thread's current stream of {@code device}. */
  public static long of(int device) {
    long[] s = CURRENT.get();
    return device >= 0 && device < s.length ? s[device] : 0;
  }

  /** Makes {@code stream} (0: the legacy default stream) the calling thread's current stream of {@code device}. */
  public static void set(int device, long stream) {
    long[] s = CURRENT.get();
    if (device >= s.length) {
      long[] grown = java.util.Arrays.copyOf(s, Math.max(device + 1, s.length * 2));
      CURRENT.set(grown);
      s = grown;
    }
    s[device] = stream;
  }
}
