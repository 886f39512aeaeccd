package io.nccl4j.nccl;

import io.nccl4j.Device;
import io.nccl4j.DeviceStream;
import io.nccl4j.internal.bind.nccl.CudaApi;
import io.nccl4j.nccl.cuda.CudaCall;
import io.nccl4j.nccl.cuda.CudaStream;
import io.nccl4j.nccl.cuda.CurrentStreams;

/**
 * Device memory of one GPU, the resource under that device's {@link io.nccl4j.memory.Allocator}.
 *
 * <ul>
 *   <li>Where the device has CUDA memory pools (almost every GPU and driver CUDA 12+ supports),
 *       memory is stream-ordered: {@code cudaMallocAsync} and {@code cudaFreeAsync} on a stream of
 *       this resource's own. A free never waits on the host, so it may come from any thread — in
 *       particular from the progress thread, when the last operation that used a closed tensor
 *       completes. That free is handed to CUDA only once the work that used the block has ended
 *       ({@link StreamOrderedFrees}): the work queued, until the tensor was closed, on the closing
 *       thread's current stream and on every stream recorded for it ({@link #recordStream}), and —
 *       for the buffers of operations a failure drained — the aborted kernels.
 *   <li>Elsewhere {@code cudaMalloc}/{@code cudaFree}; a free asked for by a thread that must not
 *       block ({@link #markNonBlockingThread}) goes to {@link DeferredFrees}.
 *   <li>Copies and fills run on the calling thread's current stream of the device
 *       ({@link CurrentStreams}) and wait for it: ordered after the work queued there, and
 *       synchronous with respect to the host, as the API promises.
 * </ul>
 */
final class CudaMemory implements StreamOrderedMemory {
  private static final ThreadLocal<Boolean> NON_BLOCKING = ThreadLocal.withInitial(() -> false);

  private final Nccl nccl;
  private final int device;
  private volatile int pooled = -1;
  private volatile CudaStream memoryStream;
  private volatile StreamOrderedFrees frees;

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

  private StreamOrderedFrees frees() {
    StreamOrderedFrees f = frees;
    if (f == null) {
      synchronized (this) {
        f = frees;
        if (f == null) {
          f = new StreamOrderedFrees(nccl, device, streamOrdered(), this::freeNow);
          frees = f;
        }
      }
    }
    return f;
  }

  @Override
  public long allocate(long bytes) {
    frees().reclaim();
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
    frees().free(address);
  }

  /** Hands the block back to CUDA now; its marks have passed ({@link StreamOrderedFrees}). */
  private void freeNow(long address) {
    if (streamOrdered()) {
      nccl.setDevice(device);
      CudaCall.check(nccl.cuda().freeAsync(address, memoryStream()), nccl.cuda(), "cudaFreeAsync", device());
    } else if (NON_BLOCKING.get()) {
      DeferredFrees.submit(() -> blockingFree(address));
    } else {
      blockingFree(address);
    }
  }

  @Override
  public void recordStream(long address, DeviceStream stream) {
    if (!stream.device().equals(device())) {
      throw new IllegalArgumentException("a stream of " + stream.device() + " cannot use memory of " + device());
    }
    frees().recordStream(address, stream);
  }

  @Override
  public void released(long address) {
    frees().released(address);
  }

  @Override
  public void quarantine(java.util.List<Long> addresses, CudaStream stream) {
    frees().quarantine(addresses, stream);
  }

  /** Frees waiting for the work that used their blocks to end (for tests and leak reports). */
  int waitingFrees() {
    return frees().waiting();
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
