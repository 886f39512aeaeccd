package io.nccl4j.launch;

import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.IntPredicate;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * What the launcher says about a failed job: which rank to blame, and in whose words. The blame comes from the
 * job's store: the first failure a group of the job recorded there ({@link GroupFailure}, typed: the rank and what
 * happened), whichever rank happened to exit first; without one (no group failed: a rank exited or died outside
 * any collective, or its backend leaves nothing there), the first rank to exit non-zero is blamed. A rank's output
 * is only quoted, never parsed for blame: each rank's standard error is watched for the line the JVM prints when a
 * thread dies of an exception ({@code Exception in thread "main" TYPE: MESSAGE}) or the nccl4j CLI's one-line error
 * ({@code nccl4j: TYPE: MESSAGE}), and the blamed rank's is quoted.
 */
final class RankFailureReport {
  /** The most of a rank's exception line the report quotes. */
  static final int MAX_QUOTE = 2048;
  /** The JVM's line for a thread that died of an exception, or the CLI's one-line error ({@code nccl4j: …}). */
  private static final Pattern UNCAUGHT = Pattern.compile("^(?:Exception in thread \"[^\"]*\"|nccl4j:) (.+)$");

  /** Each rank's last uncaught exception line, by rank. */
  private final Map<Integer, String> uncaught = new ConcurrentHashMap<>();

  /**
   * The launcher's verdict.
   *
   * @param rank the rank blamed
   * @param status the launcher's exit status: the blamed rank's, when it ended on its own; else that of the first
   *     rank to exit non-zero
   * @param line what the launcher prints after {@code "nccl4j run: failed: "}
   */
  record Verdict(int rank, int status, String line) {}

  /** A line rank {@code rank} wrote to its standard error. */
  void errorLine(int rank, String line) {
    Matcher m = UNCAUGHT.matcher(line);
    if (m.matches()) {
      String text = m.group(1);
      uncaught.put(rank, text.length() <= MAX_QUOTE ? text : text.substring(0, MAX_QUOTE) + "… [cut]");
    }
  }

  /** {@code rank exited with status 1: java.lang.IllegalStateException: …}, the quote when there is one. */
  String describe(int rank, int status) {
    String said = uncaught.get(rank);
    return "rank " + rank + " " + Launcher.describe(status) + (said == null ? "" : ": " + said);
  }

  /**
   * Whom the launcher blames, and how it says so.
   *
   * @param first the first of this node's ranks to exit non-zero
   * @param failed the exit status of each of this node's ranks that exited non-zero
   * @param stopped this node's ranks that the launcher stopped (their status is the launcher's signal, not theirs)
   * @param stored the first failure a group left in the job's store, or null when none did
   * @param local whether a rank is one of this node's
   */
  Verdict verdict(int first, Map<Integer, Integer> failed, Set<Integer> stopped, GroupFailure stored,
      IntPredicate local) {
    int firstStatus = failed.get(first);
    int blamed = stored == null ? first : stored.rank();
    if (blamed == first) {
      // The first rank to exit is the one the store names (or the store names none): its own status and words.
      return new Verdict(first, firstStatus, describe(first, firstStatus));
    }
    Integer own = failed.get(blamed);
    boolean endedOnItsOwn = own != null && !stopped.contains(blamed);
    StringBuilder line = new StringBuilder();
    if (local.test(blamed) && endedOnItsOwn) {
      line.append(describe(blamed, own));
    } else if (local.test(blamed) && uncaught.containsKey(blamed)) {
      // Stopped by the launcher while it was still ending: its own words, not the launcher's signal.
      line.append(stored.headline()).append(": ").append(uncaught.get(blamed));
    } else {
      line.append(stored.describe());
    }
    line.append(" (the first failure the job's store records").append(local.test(blamed) ? "" : ", at a rank of"
        + " another node").append("; rank ").append(first).append(", which ").append(Launcher.describe(firstStatus))
        .append(", exited first)");
    return new Verdict(blamed, endedOnItsOwn ? own : firstStatus, line.toString());
  }
}
