package io.nccl4j;

/**
 * A collective failed in the backend: a peer failed or left, a timeout fired, ranks disagreed in the
 * middle of a collective, a transport or NCCL/CUDA call failed. The group is broken afterwards:
 * every pending and later operation fails with the same cause, and the group must be closed (all
 * ranks) and created again. Outputs of the failed operation may be partly written.
 */
public class BackendException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  public BackendException(String message) {
    super(message);
  }

  public BackendException(String message, Throwable cause) {
    super(message, cause);
  }
}
