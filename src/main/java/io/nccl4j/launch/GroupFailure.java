package io.nccl4j.launch;

import io.nccl4j.FailureKind;
import io.nccl4j.internal.transport.Failure;
import io.nccl4j.internal.transport.process.FailureFrames;
import io.nccl4j.internal.transport.process.StoredFailure;
import java.util.Optional;

/**
 * The failure a group of the CPU backend leaves in its job's store, read back: which rank the group's first
 * failure is attributed to, of what kind, and in that rank's words. Every rank of the group that records a
 * failure — the rank that failed, and each peer that learns of it — leaves it under {@link #KEY} in the group's
 * namespace ({@code pg1/transport/failure} for a process's first group, {@code pg1/group/0.1/transport/failure}
 * for a subgroup of it), for peers an abort frame cannot reach; a launcher that hosts the store reads it to name
 * the rank that failed first, without parsing any rank's output.
 *
 * <p>The value is the transport's abort frame (docs/RENDEZVOUS.md, "Frames"), decoded by the transport's own reader:
 * the {@link FailureKind}'s wire code (1 byte), then 8 bytes big-endian holding the rank (high 32 bits) and the
 * message's length in bytes (low 32 bits), then the UTF-8 message. A store is no place to trust: a value that is
 * not such a frame reads as none, and a length past the value's end is cut to it.
 *
 * @param kind what happened at {@code rank}
 * @param rank the rank the failure is attributed to: the one that failed, or that timed out, or that found the
 *     mismatch
 * @param message the failure in that rank's words ({@code "rank 2 failed: IllegalStateException: …"})
 */
public record GroupFailure(FailureKind kind, int rank, String message) {
  /** The key under a group's namespace in the store. */
  public static final String KEY = StoredFailure.KEY;

  /** A failure of {@code kind} at {@code rank}, in {@code message}'s words. */
  public GroupFailure {
    if (kind == null || message == null) {
      throw new IllegalArgumentException("a group failure needs a kind and a message");
    }
  }

  /** The failure {@code value} (a value of {@link #KEY}) holds, or empty when it is not one. */
  public static Optional<GroupFailure> parse(byte[] value) {
    Failure f = FailureFrames.decode(value);
    return f == null ? Optional.empty() : Optional.of(new GroupFailure(f.kind, f.rank, f.message));
  }

  /**
   * The failure in one phrase that names the rank: the message when it starts with the rank ({@code "rank 2 failed:
   * …"}, {@code "rank 0 timed out: …"}, as a transport words them), else the {@link #headline} and the message.
   */
  public String describe() {
    return message.startsWith("rank " + rank + " ") ? message : headline() + ": " + message;
  }

  /** {@code "rank 2 failed"}, {@code "rank 0 timed out"}, {@code "rank 1 found …"}: who, and what. */
  public String headline() {
    return "rank " + rank + switch (kind) {
      case FAILED -> " failed";
      case TIMED_OUT -> " timed out";
      case MISMATCH -> " found the ranks running different collectives";
    };
  }
}
