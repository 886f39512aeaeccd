package io.nccl4j;

/**
 * An operation ran longer than the group's timeout. The message has the form of PyTorch's
 * watchdog: {@code Watchdog caught collective operation timeout: WorkCPU(SeqNum=…, OpType=…,
 * NumelIn=…, NumelOut=…, Timeout(ms)=…) ran for N milliseconds before timing out.}
 *
 * <p>When one rank times out its peers are interrupted with the same exception type, so that a
 * launcher or test can tell the first timeout from its echoes, {@link #timedOutRank()} names the
 * rank whose own wait passed the deadline.
 */
public class CollectiveTimeoutException extends BackendException {
  private static final long serialVersionUID = 1L;

  /** The rank whose own wait passed the deadline; -1 when not known. */
  private final int timedOutRank;

  /**
   * How a peer quotes {@code rank}'s timeout: {@code rank N timed out: } and its message, unless the
   * message already starts so (a timeout passed on again is not prefixed twice).
   */
  public static String quote(int rank, String message) {
    String said = "rank " + rank + " timed out: ";
    return message != null && message.startsWith(said) ? message : said + message;
  }

  /** A timeout whose originating rank is not known ({@link #timedOutRank()} is -1). */
  public CollectiveTimeoutException(String message) {
    this(message, -1);
  }

  /** A timeout first seen by {@code timedOutRank}, on that rank or quoted by one of its peers. */
  public CollectiveTimeoutException(String message, int timedOutRank) {
    super(message);
    this.timedOutRank = timedOutRank;
  }

  @Override
  public CollectiveTimeoutException withMessage(String message) {
    CollectiveTimeoutException t = new CollectiveTimeoutException(message, timedOutRank);
    t.initCause(this);
    return t;
  }

  /** The rank whose own wait timed out first, or -1 when not known. */
  public int timedOutRank() {
    return timedOutRank;
  }
}
