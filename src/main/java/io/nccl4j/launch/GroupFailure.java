package io.nccl4j.launch;

import java.nio.charset.StandardCharsets;
import java.util.Optional;

/**
 * The failure a group of the CPU backend leaves in its job's store, read back: which rank the group's first
 * failure is attributed to, of what kind, and in that rank's words. Every rank of the group that records a
 * failure — the rank that failed, and each peer that learns of it — leaves it under {@link #KEY} in the group's
 * namespace ({@code pg1/transport/failure} for a process's first group, {@code pg1/group/0.1/transport/failure}
 * for a subgroup of it), for peers an abort frame cannot reach; a launcher that hosts the store reads it to name
 * the rank that failed first, without parsing any rank's output.
 *
 * <p>The value is the transport's abort frame (docs/RENDEZVOUS.md, "Frames"): its kind (1 byte: 2 a failure, 3 a
 * timeout, 4 a mismatch), then 8 bytes big-endian holding the rank (high 32 bits) and the message's length in bytes
 * (low 32 bits), then the UTF-8 message. A store is no place to trust: a value that is not such a frame reads as
 * none, and a length past the value's end is cut to it.
 *
 * @param kind what happened at {@code rank}
 * @param rank the rank the failure is attributed to: the one that failed, or that timed out, or that found the
 *     mismatch
 * @param message the failure in that rank's words ({@code "rank 2 failed: IllegalStateException: …"})
 */
public record GroupFailure(Kind kind, int rank, String message) {
  /** The key under a group's namespace in the store. */
  public static final String KEY = "transport/failure";

  /** What happened at the rank a failure is attributed to. */
  public enum Kind {
    /** The rank failed (its program threw, it exited or was killed, its connection broke). */
    FAILED,
    /** The rank's collective timed out waiting for a peer: the rank waited, another is late or stopped. */
    TIMED_OUT,
    /** The rank found the ranks running different collectives; the message names the ranks and fields. */
    MISMATCH
  }

  private static final int HEADER_BYTES = 9;
  /** The longest message a transport writes; a longer length is read as cut. */
  private static final int MAX_TEXT_BYTES = 1 << 16;

  /** A failure of {@code kind} at {@code rank}, in {@code message}'s words. */
  public GroupFailure {
    if (kind == null || message == null) {
      throw new IllegalArgumentException("a group failure needs a kind and a message");
    }
  }

  /** The failure {@code value} (a value of {@link #KEY}) holds, or empty when it is not one. */
  public static Optional<GroupFailure> parse(byte[] value) {
    if (value == null || value.length < HEADER_BYTES) {
      return Optional.empty();
    }
    Kind kind = switch (value[0]) {
      case 2 -> Kind.FAILED;
      case 3 -> Kind.TIMED_OUT;
      case 4 -> Kind.MISMATCH;
      default -> null;
    };
    if (kind == null) {
      return Optional.empty();
    }
    long word = 0;
    for (int i = 1; i < HEADER_BYTES; i++) {
      word = (word << 8) | (value[i] & 0xffL);
    }
    int rank = (int) (word >>> 32);
    if (rank < 0) {
      return Optional.empty();
    }
    int length = (int) Math.max(0, Math.min(word & 0xffffffffL, Math.min(MAX_TEXT_BYTES, value.length - HEADER_BYTES)));
    return Optional.of(new GroupFailure(kind, rank, new String(value, HEADER_BYTES, length, StandardCharsets.UTF_8)));
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
