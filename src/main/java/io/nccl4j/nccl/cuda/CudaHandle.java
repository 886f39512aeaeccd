package io.nccl4j.nccl.cuda;

import io.nccl4j.Device;

/**
 * One raw CUDA handle (an event, a stream) and its one owner: the handle while open, a clear error after close,
 * and a close that destroys it exactly once, whichever threads call it.
 */
abstract class CudaHandle implements AutoCloseable {
  final CudaRuntime runtime;
  final Device device;
  private volatile long handle;

  CudaHandle(CudaRuntime runtime, Device device, long handle) {
    this.runtime = runtime;
    this.device = device;
    this.handle = handle;
  }

  /** What the handle is, in messages ("CudaEvent"). */
  abstract String kind();

  /** Destroys {@code h} with the runtime (cudaEventDestroy, cudaStreamDestroy). */
  abstract void destroy(long h);

  /**
   * The raw handle, for CUDA calls; this object still owns it.
   *
   * @throws IllegalStateException if it is closed
   */
  public long handle() {
    long h = handle;
    if (h == 0) {
      throw new IllegalStateException(kind() + " on " + device + " is closed");
    }
    return h;
  }

  /** True once {@link #close()} has been called; the handle is then destroyed. */
  public boolean isClosed() {
    return handle == 0;
  }

  /** Destroys the handle. Idempotent. */
  @Override
  public void close() {
    long h;
    synchronized (this) {
      h = handle;
      handle = 0;
    }
    if (h != 0) {
      destroy(h);
    }
  }

  /** The handle as it is now (0 once closed), for descriptions. */
  long rawHandle() {
    return handle;
  }
}
