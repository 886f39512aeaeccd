package io.nccl4j;

/**
 * Ranks were found running different collectives, or the same collective with sizes that do not
 * match, while it was in progress (for example rank 1 sends 5 elements where rank 2 expects 4). The
 * group is broken, as after any backend failure.
 */
public class CollectiveMismatchException extends BackendException {
  private static final long serialVersionUID = 1L;

  /** A mismatch described by {@code message}: which ranks run what, and which field differs. */
  public CollectiveMismatchException(String message) {
    super(message);
  }

  @Override
  public CollectiveMismatchException withMessage(String message) {
    CollectiveMismatchException m = new CollectiveMismatchException(message);
    m.initCause(this);
    return m;
  }
}
