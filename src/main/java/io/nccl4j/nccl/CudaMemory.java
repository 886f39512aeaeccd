package io.nccl4j.nccl;

import io.nccl4j.Device;
import io.nccl4j.memory.MemoryResource;
import io.nccl4j.nccl.bind.CudaApi;

/**
 * Device memory of one GPU, the resource under that device's {@link io.nccl4j.memory.Allocator}.
 *
 * <ul>
 *   <li>Where the device has CUDA memory pools (almost every GPU and driver CUDA 12+ supports),
 *       memory is stream-ordered: {@code cudaMallocAsync} and {@code cudaFreeAsync} on a stream of
 *       this resource's own. A free never waits on the host, so it may come from any thread — in
 *       particular from the progress thread, when the last operation that used a closed tensor
 *       completes. The memory is no longer used by nccl4j then (that operation's completion event
 *       has fired); work the application itself queued on it after closing the tensor is its own
 *       affair, as with PyTorch's caching allocator without {@code record_stream}.
 *   <li>Elsewhere {@code cudaMalloc}/{@code cudaFree}; a free asked for by a thread that must not
 *       block ({@link #markNonBlockingThread}) goes to {@link DeferredFrees}.
 *   <li>Copies and fills run on the calling thread's current stream of the device
 *       ({@link CurrentStreams}) and wait for it: ordered after the work queued there, and
 *       synchronous with respect to the host, as the API promises.
 * </ul>
 */
final class CudaMemory implements MemoryResource {
  private static final ThreadLocal<Boolean> NON_BLOCKING = ThreadLocal.withInitial(() -> false);

  private final Nccl nccl;
  private final int device;
  private volatile int pooled = -1;
  private volatile CudaStream memoryStream;

  /** {@code device} -1: a resource used only to copy external memory. */
  CudaMemory(Nccl nccl, int device) {
    this.nccl = nccl;
    this.device = device;
  }

  /** The calling thread must never wait for the GPU in a free (the NCCL progress thread). */
  static void markNonBlockingThread() {
    NON_BLOCKING.set(true);
  }

  /** True on a thread {@link #markNonBlockingThread} marked. */
  static boolean isNonBlockingThread() {
    return NON_BLOCKING.get();
  }

  @Override
  public Device device() {
    return device < 0 ? Device.cuda(0) : Device.cuda(device);
  }

  /** True when the device supports stream-ordered allocation; asked once. */
  boolean streamOrdered() {
    int p = pooled;
    if (p < 0) {
      int[] out = new int[1];
      int rc = nccl.cuda().deviceGetAttribute(out, CudaApi.DEV_ATTR_MEMORY_POOLS_SUPPORTED, device);
      p = rc == CudaApi.SUCCESS && out[0] != 0 ? 1 : 0;
      pooled = p;
    }
    return p == 1;
  }

  private long memoryStream() {
    CudaStream s = memoryStream;
    if (s == null) {
      synchronized (this) {
        s = memoryStream;
        if (s == null) {
          s = CudaStream.create(nccl, device);
          memoryStream = s;
        }
      }
    }
    return s.handle();
  }

  @Override
  public long allocate(long bytes) {
    CudaApi cuda = nccl.cuda();
    nccl.setDevice(device);
    long[] out = new long[1];
    long n = Math.max(1, bytes);
    boolean async = streamOrdered();
    int rc = async ? cuda.mallocAsync(out, n, memoryStream()) : cuda.malloc(out, n);
    if (rc == CudaApi.ERROR_MEMORY_ALLOCATION) {
      cuda.getLastError();
      throw new OutOfMemoryError("CUDA out of memory on cuda:" + device + " allocating " + bytes + " bytes");
    }
    CudaCall.check(rc, cuda, (async ? "cudaMallocAsync(" : "cudaMalloc(") + bytes + ")", device());
    if (async) {
      // Complete before any other stream may use it.
      CudaCall.check(cuda.streamSynchronize(memoryStream()), cuda, "cudaStreamSynchronize", device());
    }
    return out[0];
  }

  @Override
  public void free(long address, long bytes) {
    if (streamOrdered()) {
      nccl.setDevice(device);
      CudaCall.check(nccl.cuda().freeAsync(address, memoryStream()), nccl.cuda(), "cudaFreeAsync", device());
    } else if (NON_BLOCKING.get()) {
      DeferredFrees.submit(() -> blockingFree(address));
    } else {
      blockingFree(address);
    }
  }

  /**
   * Frees asked for from now on wait until {@code event} — the completion of an operation a failure
   * drained — has passed: an abort asks NCCL's kernels to stop but does not wait for them, and a
   * stream-ordered free would otherwise hand memory an aborted kernel may still write to the next
   * allocation at once. {@code cudaStreamWaitEvent} on this resource's stream captures the event's
   * current record, so it may be recorded again afterwards. Without memory pools there is nothing to
   * do: {@code cudaFree} synchronises the device.
   */
  void freesWaitFor(CudaEvent event) {
    if (!streamOrdered()) {
      return;
    }
    nccl.setDevice(device);
    CudaCall.check(nccl.cuda().streamWaitEvent(memoryStream(), event.handle()), nccl.cuda(),
        "cudaStreamWaitEvent (frees after an abort)", device());
  }

  private void blockingFree(long address) {
    nccl.setDevice(device);
    CudaCall.check(nccl.cuda().free(address), nccl.cuda(), "cudaFree", device());
  }

  @Override
  public void zero(long address, long bytes) {
    nccl.setDevice(device);
    CudaApi cuda = nccl.cuda();
    long stream = CurrentStreams.of(device);
    CudaCall.check(cuda.memsetAsync(address, 0, bytes, stream), cuda, "cudaMemsetAsync", device());
    CudaCall.check(cuda.streamSynchronize(stream), cuda, "cudaStreamSynchronize", device());
  }

  @Override
  public void copy(long dst, Device dstDevice, long src, Device srcDevice, long bytes) {
    if (bytes == 0) {
      return;
    }
    CudaApi cuda = nccl.cuda();
    Device on = dstDevice.isCuda() ? dstDevice : srcDevice;
    nccl.setDevice(on.index());
    long stream = CurrentStreams.of(on.index());
    CudaCall.check(cuda.memcpyAsync(dst, src, bytes, stream), cuda, "cudaMemcpyAsync(" + srcDevice + " -> "
        + dstDevice + ", " + bytes + " bytes)", on);
    CudaCall.check(cuda.streamSynchronize(stream), cuda, "cudaStreamSynchronize", on);
  }

  @Override
  public String toString() {
    return device < 0 ? "CUDA memory" : "memory of cuda:" + device;
  }
}
