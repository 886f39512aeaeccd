package io.nccl4j.nccl.cuda;

import io.nccl4j.Device;
import io.nccl4j.internal.bind.nccl.CudaApi;

/**
 * Owner of one CUDA event: completion marker and, when created with timing, a timestamp.
 * {@link #close()} destroys it once; using it afterwards throws {@link IllegalStateException}.
 */
public final class CudaEvent extends CudaHandle {
  private final boolean timing;

  private CudaEvent(CudaRuntime runtime, Device device, boolean timing, long handle) {
    super(runtime, device, handle);
    this.timing = timing;
  }

  @Override
  String kind() {
    return "CudaEvent";
  }

  @Override
  void destroy(long h) {
    CudaApi cuda = runtime.cuda();
    CudaCall.check(cuda.eventDestroy(h), cuda, "cudaEventDestroy", device);
  }

  /** Creates an event on {@code device}; {@code timing} false makes it cheaper (no timestamp). */
  public static CudaEvent create(CudaRuntime runtime, int device, boolean timing) {
    runtime.setDevice(device);
    long[] out = new long[1];
    CudaApi cuda = runtime.cuda();
    CudaCall.check(cuda.eventCreateWithFlags(out, timing ? CudaApi.EVENT_DEFAULT : CudaApi.EVENT_DISABLE_TIMING),
        cuda, "cudaEventCreateWithFlags", Device.cuda(device));
    return new CudaEvent(runtime, Device.cuda(device), timing, out[0]);
  }

  /** The device the event was created on. */
  public Device device() {
    return device;
  }

  /** Records the event at the current end of {@code stream}. */
  public void record(CudaStream stream) {
    record(stream.handle());
  }

  /** Records the event on a raw stream handle (0: the legacy default stream). */
  public void record(long streamHandle) {
    CudaApi cuda = runtime.cuda();
    CudaCall.check(cuda.eventRecord(handle(), streamHandle), cuda, "cudaEventRecord", device);
  }

  /** True once everything before the record point has finished. Never blocks. */
  public boolean isComplete() {
    CudaApi cuda = runtime.cuda();
    int rc = cuda.eventQuery(handle());
    if (rc == CudaApi.ERROR_NOT_READY) {
      return false;
    }
    CudaCall.check(rc, cuda, "cudaEventQuery", device);
    return true;
  }

  /** Blocks the host until the event completes. */
  public void synchronize() {
    CudaApi cuda = runtime.cuda();
    CudaCall.check(cuda.eventSynchronize(handle()), cuda, "cudaEventSynchronize", device);
  }

  /** Milliseconds between {@code start} and this event (both recorded, both with timing). */
  public float elapsedMillisSince(CudaEvent start) {
    if (!timing || !start.timing) {
      throw new IllegalStateException("elapsed time needs two events created with timing");
    }
    float[] ms = new float[1];
    CudaApi cuda = runtime.cuda();
    CudaCall.check(cuda.eventElapsedTime(ms, start.handle(), handle()), cuda, "cudaEventElapsedTime", device);
    return ms[0];
  }
}
