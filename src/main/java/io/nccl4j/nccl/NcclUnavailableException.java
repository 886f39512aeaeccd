package io.nccl4j.nccl;

/** NCCL cannot be used on this machine; the message says why and what to do. */
public class NcclUnavailableException extends IllegalStateException {
  private static final long serialVersionUID = 1L;

  /** Why NCCL cannot be used and what to do, without the leading sentence. */
  private final String reason;

  /** NCCL is unavailable for {@code reason}, which should say the remedy; the message prefixes a sentence. */
  public NcclUnavailableException(String reason) {
    super("The NCCL backend is not available: " + reason);
    this.reason = reason;
  }

  /** The reason alone, without the leading sentence. */
  public String reason() {
    return reason;
  }
}
