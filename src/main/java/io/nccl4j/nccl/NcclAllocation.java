package io.nccl4j.nccl;

import io.nccl4j.Settings;
import java.util.Locale;

/**
 * Where the tensors of an NCCL group come from. NCCL requires the choice to be the same on every
 * rank: "if any rank in a communicator passes registered buffers to a NCCL communication function,
 * all other ranks in the same communicator must pass their registered buffers" (user guide, User
 * Buffer Registration).
 */
public enum NcclAllocation {
  /** The device's memory pool (cudaMallocAsync), or cudaMalloc: what PyTorch's caching allocator gives. */
  PLAIN,
  /**
   * ncclMemAlloc, each block registered with the communicator (ncclCommRegister, NCCL ≥ 2.19): NCCL
   * can then send and receive from the buffer without copying it (zero-copy, fewer channels).
   * Allocation is local.
   */
  REGISTERED,
  /**
   * ncclMemAlloc, each block registered as a symmetric window (ncclCommWindowRegister, NCCL ≥
   * 2.27), which NCCL's symmetric-memory kernels use. Registration is collective: every rank must
   * allocate its tensors in the same order with the same sizes (SPMD code does). Deregistration is
   * local.
   */
  SYMMETRIC;

  /** {@code NCCL4J_NCCL_ALLOCATOR}: plain (the default), registered or symmetric. */
  public static NcclAllocation fromEnvironment() {
    String v = Settings.NCCL4J_NCCL_ALLOCATOR.get();
    return v == null || v.isBlank() ? PLAIN : parse(v);
  }

  /**
   * {@code plain}, {@code registered} or {@code symmetric}, in any case.
   *
   * @throws IllegalArgumentException for anything else, naming the text
   */
  public static NcclAllocation parse(String text) {
    try {
      return valueOf(text.trim().toUpperCase(Locale.ROOT));
    } catch (IllegalArgumentException e) {
      throw new IllegalArgumentException("NCCL4J_NCCL_ALLOCATOR must be plain, registered or symmetric, got '" + text
          + "'");
    }
  }
}
