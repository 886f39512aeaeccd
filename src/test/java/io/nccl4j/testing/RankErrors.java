package io.nccl4j.testing;

import static org.assertj.core.api.Assertions.catchThrowable;

import io.nccl4j.ProcessGroup;
import java.util.concurrent.atomic.AtomicReferenceArray;
import org.assertj.core.api.ThrowableAssert.ThrowingCallable;

/**
 * What each rank of a failing run threw. The cluster reports one rank's failure; a test of failure
 * propagation must see every rank's error (who blamed whom), so each rank keeps its own and still
 * fails as it would have.
 */
public final class RankErrors {
  private RankErrors() {}

  /**
   * Runs {@code call} on this rank, stores what it threw (null when nothing) at the rank's index of
   * {@code seen}, and throws it on, so that the rank fails as it would have without the record.
   */
  public static void recordAndThrow(AtomicReferenceArray<Throwable> seen, ProcessGroup pg, ThrowingCallable call)
      throws Exception {
    Throwable e = catchThrowable(call);
    seen.set(pg.rank(), e);
    if (e != null) {
      throw (Exception) e;
    }
  }
}
