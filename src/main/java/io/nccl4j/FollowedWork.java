package io.nccl4j;

import java.time.Duration;

/**
 * The Work of a list form that finishes on the host after its collective: it completes once the
 * collective's Work has and a follow-up (copying a temporary into the caller's tensors) has run,
 * on the thread that completed the collective. {@code release} (closing the temporaries) runs
 * either way, first on failure. Waiting is on the host: a device stream cannot wait for the copy.
 */
final class FollowedWork extends AbstractWork {
  private final Duration timeout;

  FollowedWork(Work collective, Duration timeout, Runnable followUp, Runnable release) {
    super(collective.opType(), collective.sequenceNumber());
    this.timeout = timeout;
    collective.future().whenComplete((w, error) -> {
      Throwable failure = error;
      try {
        if (failure == null) {
          followUp.run();
        }
      } catch (RuntimeException e) {
        failure = new BackendException("the copy out of " + collective + " failed: " + e, e);
      } finally {
        try {
          release.run();
        } catch (RuntimeException e) {
          failure = failure != null ? failure : e;
        }
      }
      finish(failure == null ? collective.stats().orElse(null) : null, failure);
    });
  }

  @Override
  Duration waitTimeout() {
    return timeout;
  }

  @Override
  boolean waitOnDevice(DeviceStream consumer) {
    return false;
  }
}
