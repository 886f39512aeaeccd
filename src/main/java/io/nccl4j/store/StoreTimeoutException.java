package io.nccl4j.store;

import io.nccl4j.BackendException;

/** A store wait ran out of time; the message names the store, the keys and the wait. */
public class StoreTimeoutException extends BackendException {
  private static final long serialVersionUID = 1L;

  /**
   * A wait that ran out — for keys, for the server's answer, or to connect — described by
   * {@code message}: the store, what was waited for, and how long.
   */
  public StoreTimeoutException(String message) {
    super(message);
  }

  @Override
  public StoreTimeoutException withMessage(String message) {
    StoreTimeoutException t = new StoreTimeoutException(message);
    t.initCause(this);
    return t;
  }
}
