package io.nccl4j.nccl;

/** NCCL cannot be used on this machine; the message says why and what to do. */
public class NcclUnavailableException extends IllegalStateException {
  private static final long serialVersionUID = 1L;

  private final String reason;

  public NcclUnavailableException(String reason) {
    super("The NCCL backend is not available: " + reason);
    this.reason = reason;
  }

  /** The reason alone, without the leading sentence. */
  public String reason() {
    return reason;
  }
}
