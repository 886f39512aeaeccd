package io.nccl4j.memory;

import io.nccl4j.Device;

/**
 * Raw memory of one device: host memory here, CUDA device memory in the NCCL backend. An
 * {@link Allocator} adds accounting on top; this interface only obtains and returns bytes.
 */
public interface MemoryResource {
  /** The device whose memory this is. */
  Device device();

  /** Obtains {@code bytes} bytes and returns their address; never returns 0. */
  long allocate(long bytes);

  /** Returns a block obtained from {@link #allocate}. */
  void free(long address, long bytes);

  /** Sets {@code bytes} bytes at {@code address} to zero. */
  void zero(long address, long bytes);

  /** Host memory through malloc/free. */
  MemoryResource HOST = new MemoryResource() {
    @Override
    public Device device() {
      return Device.cpu();
    }

    @Override
    public long allocate(long bytes) {
      try {
        return NativeMemory.allocate(bytes);
      } catch (OutOfMemoryError e) {
        throw new OutOfMemoryError("Could not allocate " + bytes + " bytes of host memory: " + e.getMessage());
      }
    }

    @Override
    public void free(long address, long bytes) {
      NativeMemory.free(address);
    }

    @Override
    public void zero(long address, long bytes) {
      NativeMemory.fill(address, bytes, (byte) 0);
    }

    @Override
    public String toString() {
      return "host memory";
    }
  };
}
