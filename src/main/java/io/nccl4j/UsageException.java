package io.nccl4j;

/**
 * A call was wrong (bad sizes, types, ranks, operators, devices). Thrown on the calling rank
 * <b>before anything is enqueued or sent</b>; the group stays usable and no other rank is affected
 * (but ranks that did enter the collective will wait for this one, so keep ranks consistent).
 *
 * <p>{@link #torchMessage()} is PyTorch ProcessGroupNCCL's text for the same mistake, so it can be
 * searched for; {@link #getMessage()} appends the actual numbers.
 */
public class UsageException extends IllegalArgumentException {
  private static final long serialVersionUID = 1L;
  /** PyTorch's text for this mistake, without the numbers; see {@link #torchMessage()}. */
  private final String torchMessage;

  /**
   * A mistake described by {@code torchMessage} (PyTorch's text) and {@code details}, what was
   * expected and what was got; the message is {@code torchMessage (details)}, or the text alone
   * when {@code details} is null or empty.
   */
  public UsageException(String torchMessage, String details) {
    super(details == null || details.isEmpty() ? torchMessage : torchMessage + " (" + details + ")");
    this.torchMessage = torchMessage;
  }

  /** A mistake described by {@code torchMessage} alone, with no details to append. */
  public UsageException(String torchMessage) {
    this(torchMessage, null);
  }

  /**
   * The same mistake as {@code original}, with its exact message, caused by it: what
   * {@link #rethrown()} makes. Subclasses with details of their own use it in their override.
   */
  protected UsageException(UsageException original) {
    super(original.getMessage(), original);
    this.torchMessage = original.torchMessage;
  }

  /**
   * The same mistake, of the same type and with the same message (not prefixed again), caused by
   * this one: for rethrowing on the thread that waits for a failed operation. Subclasses with
   * details of their own override it.
   */
  public UsageException rethrown() {
    return new UsageException(this);
  }

  /** The message without the details: PyTorch's exact text where PyTorch has one. */
  public String torchMessage() {
    return torchMessage;
  }
}
