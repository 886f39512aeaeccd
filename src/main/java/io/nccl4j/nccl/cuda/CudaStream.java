package io.nccl4j.nccl.cuda;

import io.nccl4j.Device;
import io.nccl4j.DeviceStream;
import io.nccl4j.internal.bind.nccl.CudaApi;

/**
 * Owner of one non-blocking CUDA stream ({@code cudaStreamNonBlocking}: it does not synchronize
 * with the legacy default stream). {@link #close()} destroys it once; using it afterwards throws
 * {@link IllegalStateException}.
 */
public final class CudaStream extends CudaHandle implements DeviceStream {
  private CudaStream(CudaRuntime runtime, Device device, long handle) {
    super(runtime, device, handle);
  }

  @Override
  String kind() {
    return "CudaStream";
  }

  @Override
  void destroy(long h) {
    CudaApi cuda = runtime.cuda();
    CudaCall.check(cuda.streamDestroy(h), cuda, "cudaStreamDestroy", device);
  }

  /** Creates a non-blocking stream on {@code device}. */
  public static CudaStream create(CudaRuntime runtime, int device) {
    runtime.setDevice(device);
    long[] out = new long[1];
    CudaApi cuda = runtime.cuda();
    CudaCall.check(cuda.streamCreateWithFlags(out, CudaApi.STREAM_NON_BLOCKING), cuda, "cudaStreamCreateWithFlags",
        Device.cuda(device));
    return new CudaStream(runtime, Device.cuda(device), out[0]);
  }

  @Override
  public Device device() {
    return device;
  }


  /** Blocks the host until all work queued on the stream has finished. */
  public void synchronize() {
    CudaApi cuda = runtime.cuda();
    CudaCall.check(cuda.streamSynchronize(handle()), cuda, "cudaStreamSynchronize", device);
  }

  /** Makes this stream wait for {@code event} (device-side; the host does not block). */
  public void waitEvent(CudaEvent event) {
    CudaApi cuda = runtime.cuda();
    CudaCall.check(cuda.streamWaitEvent(handle(), event.handle()), cuda, "cudaStreamWaitEvent", device);
  }

  /** The runtime this stream belongs to (for helpers such as {@link CudaGraph}). */
  CudaRuntime runtime() {
    return runtime;
  }

  @Override
  public String toString() {
    long h = rawHandle();
    return "CudaStream(" + device + (h == 0 ? ", closed" : ", 0x" + Long.toHexString(h)) + ")";
  }
}
