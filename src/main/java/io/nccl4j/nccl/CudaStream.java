package io.nccl4j.nccl;

import io.nccl4j.Device;
import io.nccl4j.DeviceStream;
import io.nccl4j.nccl.bind.CudaApi;

/**
 * Owner of one non-blocking CUDA stream ({@code cudaStreamNonBlocking}: it does not synchronize
 * with the legacy default stream). {@link #close()} destroys it once; using it afterwards throws
 * {@link IllegalStateException}.
 */
public final class CudaStream implements DeviceStream, AutoCloseable {
  private final Nccl nccl;
  private final Device device;
  private volatile long handle;

  private CudaStream(Nccl nccl, Device device, long handle) {
    this.nccl = nccl;
    this.device = device;
    this.handle = handle;
  }

  /** Creates a non-blocking stream on {@code device}. */
  public static CudaStream create(Nccl nccl, int device) {
    nccl.setDevice(device);
    long[] out = new long[1];
    CudaApi cuda = nccl.cuda();
    CudaCall.check(cuda.streamCreateWithFlags(out, CudaApi.STREAM_NON_BLOCKING), cuda, "cudaStreamCreateWithFlags",
        Device.cuda(device));
    return new CudaStream(nccl, Device.cuda(device), out[0]);
  }

  @Override
  public Device device() {
    return device;
  }

  @Override
  public long handle() {
    long h = handle;
    if (h == 0) {
      throw new IllegalStateException("CudaStream on " + device + " is closed");
    }
    return h;
  }

  /** Blocks the host until all work queued on the stream has finished. */
  public void synchronize() {
    CudaApi cuda = nccl.cuda();
    CudaCall.check(cuda.streamSynchronize(handle()), cuda, "cudaStreamSynchronize", device);
  }

  /** Makes this stream wait for {@code event} (device-side; the host does not block). */
  public void waitEvent(CudaEvent event) {
    CudaApi cuda = nccl.cuda();
    CudaCall.check(cuda.streamWaitEvent(handle(), event.handle()), cuda, "cudaStreamWaitEvent", device);
  }

  /** The runtime this stream belongs to (for helpers such as {@link CudaGraph}). */
  Nccl nccl() {
    return nccl;
  }

  /** True once {@link #close()} has been called; the stream is then destroyed. */
  public boolean isClosed() {
    return handle == 0;
  }

  /** Destroys the stream (pending work still completes, as CUDA defines). Idempotent. */
  @Override
  public void close() {
    long h;
    synchronized (this) {
      h = handle;
      handle = 0;
    }
    if (h != 0) {
      CudaApi cuda = nccl.cuda();
      CudaCall.check(cuda.streamDestroy(h), cuda, "cudaStreamDestroy", device);
    }
  }

  @Override
  public String toString() {
    return "CudaStream(" + device + (handle == 0 ? ", closed" : ", 0x" + Long.toHexString(handle)) + ")";
  }
}
