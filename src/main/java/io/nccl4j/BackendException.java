package io.nccl4j;

/**
 * A collective failed in the backend: a peer failed or left, a timeout fired, ranks disagreed in the
 * middle of a collective, a transport or NCCL/CUDA call failed. The group is broken afterwards:
 * every pending and later operation fails with the same cause, and the group must be closed (all
 * ranks) and created again. Outputs of the failed operation may be partly written.
 */
public class BackendException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  /** A failure described by {@code message}, with no underlying cause. */
  public BackendException(String message) {
    super(message);
  }

  /** A failure described by {@code message}, caused by {@code cause}: the underlying error, or null. */
  public BackendException(String message, Throwable cause) {
    super(message, cause);
  }

  /**
   * The same failure, of the same type and with the same details, told with {@code message} and
   * caused by this one: for rethrowing on another thread, or for every later operation of a broken
   * group. Subclasses with details of their own override it.
   */
  public BackendException withMessage(String message) {
    return new BackendException(message, this);
  }
}
