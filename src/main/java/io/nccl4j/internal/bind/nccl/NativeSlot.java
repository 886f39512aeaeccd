package io.nccl4j.internal.bind.nccl;

/**
 * One pointer-sized out-parameter in native memory, for the calls that NCCL may complete after they
 * returned: on a nonblocking communicator {@code ncclCommSplit} and {@code ncclCommShrink} set
 * {@code *newcomm} to NULL at the call and NCCL's own thread writes the new communicator there when
 * the parent's job ends (init.cc, {@code job->newcomm}); {@code ncclCommWindowRegister} fills
 * {@code *win} at group end. A Java array cannot be that out-parameter — the binding would hand NCCL
 * a slot that dies when the call returns — so the caller owns this one, made by
 * {@link NcclApi#newSlot()} holding NULL, reads it only once the job has ended, and closes it only
 * when NCCL can no longer write it.
 */
public interface NativeSlot extends AutoCloseable {
  /** The address NCCL wrote (0 while it holds NULL). */
  long get();

  /** Frees the native memory; only once NCCL's job that writes it has ended. Idempotent. */
  @Override
  void close();
}
