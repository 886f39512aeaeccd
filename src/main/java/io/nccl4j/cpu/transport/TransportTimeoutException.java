package io.nccl4j.cpu.transport;

/** A transport wait passed its deadline; the backend turns it into a CollectiveTimeoutException. */
public final class TransportTimeoutException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  public TransportTimeoutException(String waitingFor) {
    super(waitingFor);
  }
}
