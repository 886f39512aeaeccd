package io.nccl4j.launch;

import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * What the launcher says about a failed job: which rank to blame and in its own words. Each rank's
 * standard error is watched for the line the JVM prints when a thread dies of an exception
 * ({@code Exception in thread "main" TYPE: MESSAGE}), or the nccl4j CLI's one-line error
 * ({@code nccl4j: TYPE: MESSAGE}); the report quotes the failed rank's line. A
 * rank that only reported another's failure ({@code PeerFailureException: rank K failed: …}, or
 * {@code rank K timed out: …}) passes the blame on to rank K when K failed too, whichever process
 * happened to exit first.
 */
final class RankFailureReport {
  /** The most of a rank's exception line the report quotes. */
  static final int MAX_QUOTE = 2048;
  /** The JVM's line for a thread that died of an exception, or the CLI's one-line error ({@code nccl4j: …}). */
  private static final Pattern UNCAUGHT = Pattern.compile("^(?:Exception in thread \"[^\"]*\"|nccl4j:) (.+)$");
  private static final Pattern ECHO = Pattern.compile(
      "^(?:[\\w.$]+\\.)?(?:PeerFailureException|CollectiveTimeoutException): rank (\\d+) (?:failed|timed out): .*");

  /** Each rank's last uncaught exception line, by rank. */
  private final Map<Integer, String> uncaught = new ConcurrentHashMap<>();

  /** A line rank {@code rank} wrote to its standard error. */
  void errorLine(int rank, String line) {
    Matcher m = UNCAUGHT.matcher(line);
    if (m.matches()) {
      String text = m.group(1);
      uncaught.put(rank, text.length() <= MAX_QUOTE ? text : text.substring(0, MAX_QUOTE) + "… [cut]");
    }
  }

  /**
   * The rank to blame when {@code first} failed first: the rank its exception says failed, when that
   * rank is one of {@code failed} (status by rank, 0 for ranks that did not fail), else {@code first}.
   */
  int blame(int first, Map<Integer, Integer> failed) {
    String said = uncaught.get(first);
    if (said != null) {
      Matcher m = ECHO.matcher(said);
      if (m.matches()) {
        int origin = Integer.parseInt(m.group(1));
        Integer status = failed.get(origin);
        if (origin != first && status != null && status != 0) {
          return origin;
        }
      }
    }
    return first;
  }

  /** {@code rank exited with status 1: java.lang.IllegalStateException: …}, the quote when there is one. */
  String describe(int rank, int status) {
    String said = uncaught.get(rank);
    return "rank " + rank + " " + Launcher.describe(status) + (said == null ? "" : ": " + said);
  }
}
