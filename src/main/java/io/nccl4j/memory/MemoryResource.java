package io.nccl4j.memory;

import io.nccl4j.Device;
import io.nccl4j.DeviceStream;

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

  /**
   * Work queued on {@code stream} uses the block at {@code address} (PyTorch's {@code record_stream}):
   * a resource whose frees are ordered on streams frees it only after the work queued there before
   * the block was released. Host memory has nothing to wait for: the default ignores it.
   */
  default void recordStream(long address, DeviceStream stream) {}

  /**
   * The last holder of the block at {@code address} let it go, on the calling thread, before
   * {@link #free} (which may come later, when the last operation using the block ends): a resource
   * whose frees are ordered on streams marks there the point after which the memory may be reused —
   * on the calling thread's current stream and on every stream recorded for it. The default ignores it.
   */
  default void released(long address) {}

  /** Sets {@code bytes} bytes at {@code address} to zero. */
  void zero(long address, long bytes);

  /**
   * Copies {@code bytes} bytes between any two devices this resource can reach (host memory and its
   * own device), synchronously with respect to the host.
   *
   * @throws IllegalStateException when it cannot reach one of the devices
   */
  default void copy(long dst, Device dstDevice, long src, Device srcDevice, long bytes) {
    if (!dstDevice.isCpu() || !srcDevice.isCpu()) {
      throw new IllegalStateException(this + " cannot copy from " + srcDevice + " to " + dstDevice);
    }
    NativeMemory.copy(src, dst, bytes);
  }

  /**
   * The resource that copies to and from devices of {@code type} for memory nccl4j did not allocate
   * (wrapped tensors); registered by the NCCL backend when the CUDA runtime loads.
   */
  static MemoryResource forExternal(Device.Type type) {
    MemoryResource r = Registry.EXTERNAL.get(type);
    if (r == null) {
      throw new IllegalStateException("Copying " + type + " memory needs the CUDA runtime, which is not loaded"
          + " (see ./nccl4j info)");
    }
    return r;
  }

  /** Registers the resource used for external memory of {@code type}. */
  static void registerExternal(Device.Type type, MemoryResource r) {
    Registry.EXTERNAL.put(type, r);
  }

  /** Holder of the external-memory registry. */
  final class Registry {
    private static final java.util.Map<Device.Type, MemoryResource> EXTERNAL =
        new java.util.concurrent.ConcurrentHashMap<>();

    private Registry() {}
  }

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
