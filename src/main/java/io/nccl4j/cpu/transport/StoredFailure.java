package io.nccl4j.cpu.transport;

import io.nccl4j.store.Store;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A TCP group's failure left in its store, for the peers an abort frame cannot reach: those not
 * connected to the failing rank, which dial it later, when it may have closed. The failing rank
 * leaves its abort frame under {@link #KEY}; a rank whose dial is refused reads it and fails with
 * the same cause, in its words, instead of dialling a closed port until its timeout.
 */
public final class StoredFailure {
  private static final Logger LOG = LoggerFactory.getLogger(StoredFailure.class);
  public static final String KEY = "transport/failure";

  private StoredFailure() {}

  /**
   * Leaves {@code f} in {@code store} unless a failure is there already (the first one is the cause), on a thread of
   * its own: the store may be gone too, and the failing path never waits.
   */
  public static Thread leave(Store store, int rank, Failure f) {
    byte[] frame = FailureFrames.abortFrame(FailureFrames.abortKind(f), f.rank, f.message.getBytes(StandardCharsets.UTF_8));
    Thread t = new Thread(() -> {
      try {
        store.compareSet(KEY, new byte[0], frame); // the first failure left stays: later ones are its consequences
      } catch (RuntimeException e) {
        LOG.debug("rank {}: could not leave the failure in the store: {}", rank, e.toString());
      }
    }, "nccl4j-tcp-failure-rank" + rank);
    t.setDaemon(true);
    t.start();
    return t;
  }

  /** The failure a peer left in {@code store}, or null when none is there (or it is not an abort frame). */
  public static Failure find(Store store) {
    if (!store.check(List.of(KEY))) {
      return null;
    }
    byte[] frame = store.get(KEY, Duration.ofSeconds(1));
    if (frame.length < FailureFrames.ABORT_HEADER_BYTES) {
      return null;
    }
    byte[] header = Arrays.copyOfRange(frame, 1, FailureFrames.ABORT_HEADER_BYTES);
    int root = FailureFrames.abortRoot(header);
    int n = Math.min(FailureFrames.abortTextBytes(header), frame.length - FailureFrames.ABORT_HEADER_BYTES);
    String text = new String(frame, FailureFrames.ABORT_HEADER_BYTES, n, StandardCharsets.UTF_8);
    return FailureFrames.abortFailure(frame[0], root, text);
  }
}
