package io.nccl4j.nccl;

import io.nccl4j.Device;
import io.nccl4j.memory.MemoryResource;
import io.nccl4j.nccl.bind.CudaApi;

/**
 * Device memory of one GPU (cudaMalloc/cudaFree), the resource under that device's
 * {@link io.nccl4j.memory.Allocator}. Copies use cudaMemcpy with unified addressing, which is
 * synchronous with respect to the host.
 */
final class CudaMemory implements MemoryResource {
  private final Nccl nccl;
  private final int device;

  /** {@code device} -1: a resource used only to copy external memory. */
  CudaMemory(Nccl nccl, int device) {
    this.nccl = nccl;
    this.device = device;
  }

  @Override
  public Device device() {
    return device < 0 ? Device.cuda(0) : Device.cuda(device);
  }

  @Override
  public long allocate(long bytes) {
    CudaApi cuda = nccl.cuda();
    nccl.setDevice(device);
    long[] out = new long[1];
    int rc = cuda.malloc(out, Math.max(1, bytes));
    if (rc == CudaApi.ERROR_MEMORY_ALLOCATION) {
      cuda.getLastError();
      throw new OutOfMemoryError("CUDA out of memory on cuda:" + device + " allocating " + bytes + " bytes");
    }
    CudaCall.check(rc, cuda, "cudaMalloc(" + bytes + ")", device());
    return out[0];
  }

  @Override
  public void free(long address, long bytes) {
    nccl.setDevice(device);
    CudaCall.check(nccl.cuda().free(address), nccl.cuda(), "cudaFree", device());
  }

  @Override
  public void zero(long address, long bytes) {
    nccl.setDevice(device);
    CudaApi cuda = nccl.cuda();
    CudaCall.check(cuda.memsetAsync(address, 0, bytes, 0), cuda, "cudaMemsetAsync", device());
    CudaCall.check(cuda.streamSynchronize(0), cuda, "cudaStreamSynchronize", device());
  }

  @Override
  public void copy(long dst, Device dstDevice, long src, Device srcDevice, long bytes) {
    if (bytes == 0) {
      return;
    }
    CudaApi cuda = nccl.cuda();
    if (dstDevice.isCuda()) {
      nccl.setDevice(dstDevice.index());
    } else if (srcDevice.isCuda()) {
      nccl.setDevice(srcDevice.index());
    }
    CudaCall.check(cuda.memcpy(dst, src, bytes), cuda, "cudaMemcpy(" + srcDevice + " -> " + dstDevice + ", "
        + bytes + " bytes)", dstDevice.isCuda() ? dstDevice : srcDevice);
  }

  @Override
  public String toString() {
    return device < 0 ? "CUDA memory" : "memory of cuda:" + device;
  }
}
