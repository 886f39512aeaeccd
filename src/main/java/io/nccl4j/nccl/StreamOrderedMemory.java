package io.nccl4j.nccl;

import io.nccl4j.memory.MemoryResource;
import io.nccl4j.nccl.cuda.CudaStream;
import java.util.List;

/**
 * Device memory whose frees wait for the work that used it ({@link StreamOrderedFrees}): the
 * device's own memory and NCCL's registered memory, which a backend's failure hands the buffers of
 * the operations it drained.
 */
interface StreamOrderedMemory extends MemoryResource {
  /**
   * The blocks at {@code addresses} were used by operations a failure drained: their frees wait until
   * the work queued so far on {@code stream} — the aborted kernels — has ended. Nothing else waits.
   */
  void quarantine(List<Long> addresses, CudaStream stream);
}
