package io.nccl4j.store;

import io.nccl4j.BackendException;

/** A store wait ran out of time; the message names the store, the keys and the wait. */
public class StoreTimeoutException extends BackendException {
  private static final long serialVersionUID = 1L;

  public StoreTimeoutException(String message) {
    super(message);
  }
}
