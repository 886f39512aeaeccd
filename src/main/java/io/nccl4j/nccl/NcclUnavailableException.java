package io.nccl4j.nccl;

/** NCCL cannot be used on this machine; the message says why and what to do. */
public class NcclUnavailableException extends IllegalStateException {
  private static final long serialVersionUID = 1L;

  public NcclUnavailableException(String reason) {
    super("The NCCL backend is not available: " + reason);
  }
}
