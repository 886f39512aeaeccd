package io.nccl4j.memory;

import io.nccl4j.Device;
import java.util.Objects;
import java.util.concurrent.atomic.AtomicBoolean;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A region of memory someone else owns — another native library's buffer, a direct ByteBuffer, a
 * JavaCPP Pointer — described for {@code Tensor.wrap(ExternalMemory, DType)}: its address and size
 * in bytes, its device, the object that must stay reachable while nccl4j uses it, and whom to tell
 * when nccl4j is done with it.
 *
 * <p><b>The release callback</b> ({@link #onRelease}) runs exactly once, when the tensor wrapped
 * from this region is closed <em>and</em> every operation that used it has completed — on the
 * thread that ends the last use: the one calling {@code close()}, a backend's completion thread, or
 * the collector's cleaner thread when the tensor is garbage-collected unclosed (which is also
 * reported as a leak). Views of the tensor need no closing and do not delay it; a ByteBuffer view
 * ({@code Tensor.asByteBuffer}) does, until the buffer is collected. The callback should be short
 * and must not block on nccl4j; what it throws is logged, never passed on, since it may run on a
 * backend's thread. Memory nccl4j no longer uses may then be freed or reused by its owner.
 *
 * <p>Immutable; {@link #onRelease} and {@link #keepReachable} return new descriptions. Each
 * description can be wrapped once, so that one region cannot call its owner back twice by mistake.
 */
public final class ExternalMemory {
  private static final Logger LOG = LoggerFactory.getLogger(ExternalMemory.class);

  private final long address;
  private final long bytes;
  private final Device device;
  private final Object referent;
  private final Runnable onRelease;
  private final AtomicBoolean claimed = new AtomicBoolean();

  private ExternalMemory(long address, long bytes, Device device, Object referent, Runnable onRelease) {
    this.address = address;
    this.bytes = bytes;
    this.device = device;
    this.referent = referent;
    this.onRelease = onRelease;
  }

  /**
   * {@code bytes} bytes at {@code address} on {@code device} (a host address for {@code cpu}, a CUDA
   * device pointer for {@code cuda:N}).
   *
   * @throws IllegalArgumentException for a negative size, a null address, or a range past the end
   *     of the address space
   */
  public static ExternalMemory of(long address, long bytes, Device device) {
    Objects.requireNonNull(device, "device");
    MemoryBlock.checkExternalRange(address, bytes, "external memory on " + device);
    return new ExternalMemory(address, bytes, device, null, null);
  }

  /** The same region, whose owner {@code callback} tells when nccl4j is done with it (see the class comment). */
  public ExternalMemory onRelease(Runnable callback) {
    Objects.requireNonNull(callback, "callback");
    return new ExternalMemory(address, bytes, device, referent, callback);
  }

  /**
   * The same region, keeping {@code referent} reachable while the tensor or any operation uses the
   * memory: the object whose collection would free it (a direct ByteBuffer, a JavaCPP Pointer).
   */
  public ExternalMemory keepReachable(Object referent) {
    Objects.requireNonNull(referent, "referent");
    return new ExternalMemory(address, bytes, device, referent, onRelease);
  }

  /** The first byte's address. */
  public long address() {
    return address;
  }

  /** The size in bytes. */
  public long bytes() {
    return bytes;
  }

  /** Where the memory lives. */
  public Device device() {
    return device;
  }

  /** True when a release callback was given. */
  public boolean hasReleaseCallback() {
    return onRelease != null;
  }

  Object referent() {
    return referent;
  }

  /**
   * The one block over this region, for the tensor that wraps it.
   *
   * @param description what the block is, as leak reports and errors name it
   * @throws IllegalStateException if this description was wrapped before
   */
  public MemoryBlock claim(String description) {
    if (!claimed.compareAndSet(false, true)) {
      throw new IllegalStateException("External memory of " + bytes + " bytes at 0x" + Long.toHexString(address)
          + " on " + device + " is already wrapped by a tensor; expected a description not wrapped before"
          + " (wrap once and take slices of that tensor)");
    }
    Runnable callback = onRelease;
    return MemoryBlock.external(this, description, callback == null ? null : () -> tell(callback, description));
  }

  private static void tell(Runnable callback, String description) {
    try {
      callback.run();
    } catch (RuntimeException | Error e) {
      LOG.warn("The release callback of {} threw; nccl4j is done with the memory all the same", description, e);
    }
  }

  @Override
  public String toString() {
    return "external memory of " + bytes + " bytes at 0x" + Long.toHexString(address) + " on " + device
        + (onRelease == null ? "" : ", with a release callback");
  }
}
