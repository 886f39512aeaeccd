package io.nccl4j.launch;

import io.nccl4j.FailureKind;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.IntPredicate;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * What the launcher says about a failed job: which rank to blame, and in whose words. The blame comes from the
 * job's store: the first failure a group of the job recorded there ({@link GroupFailure}, typed: the rank and what
 * happened), whichever rank happened to exit first; without one (no group failed: a rank exited or died outside
 * any collective, or its backend leaves nothing there), the first rank to exit non-zero is blamed. When that first
 * failure is a timeout and one of this node's ranks was stopped (SIGSTOP, a debugger) as the ranks failed, the
 * timed-out rank only waited for it: the stopped rank is blamed, which the launcher sees in its process's state,
 * not in what the survivors wrote. A rank's output is only quoted, never parsed for blame: each rank's standard
 * error is watched for the line the JVM prints when a thread dies of an exception ({@code Exception in thread
 * "main" TYPE: MESSAGE}) or the nccl4j CLI's one-line error ({@code nccl4j: TYPE: MESSAGE}), and the blamed rank's
 * is quoted.
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
   * @param frozen this node's ranks whose process was stopped (SIGSTOP, a debugger) when a rank exited non-zero,
   *     each with its pid: when {@code stored} is a timeout, the lowest of them is blamed
   */
  Verdict verdict(int first, Map<Integer, Integer> failed, Set<Integer> stopped, GroupFailure stored,
      IntPredicate local, Map<Integer, Long> frozen) {
    int firstStatus = failed.get(first);
    if (stored != null && stored.kind() == FailureKind.TIMED_OUT && !frozen.isEmpty()) {
      return frozenVerdict(first, failed, stopped, stored, local, new TreeMap<>(frozen));
    }
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
    line.append(firstFailure(first, firstStatus, stored, local));
    return new Verdict(blamed, endedOnItsOwn ? own : firstStatus, line.toString());
  }

  /**
   * A timeout in the store while ranks of this node were stopped: the rank that timed out waited, the lowest stopped
   * rank is blamed — {@code rank 1 (pid 4711) is stopped (SIGSTOP or a debugger); rank 0 timed out waiting: …} —
   * with its own status when it ended on its own (resumed, it failed or was killed from outside), else the first
   * rank's to exit, as for any blamed rank.
   */
  private Verdict frozenVerdict(int first, Map<Integer, Integer> failed, Set<Integer> stopped, GroupFailure stored,
      IntPredicate local, TreeMap<Integer, Long> frozen) {
    int firstStatus = failed.get(first);
    int blamed = frozen.firstKey();
    Integer own = failed.get(blamed);
    boolean endedOnItsOwn = own != null && !stopped.contains(blamed);
    List<String> named = new ArrayList<>();
    frozen.forEach((rank, pid) -> named.add(rank + " (pid " + pid + ")"));
    String who = named.size() == 1 ? "rank " + named.get(0) + " is"
        : "ranks " + String.join(", ", named.subList(0, named.size() - 1)) + " and " + named.get(named.size() - 1)
        + " are";
    String said = "rank " + stored.rank() + " timed out: ";
    String waited = stored.message().startsWith(said) ? stored.message().substring(said.length()) : stored.message();
    String line = who + " stopped (SIGSTOP or a debugger); rank " + stored.rank() + " timed out waiting: " + waited
        + firstFailure(first, firstStatus, stored, local);
    return new Verdict(blamed, endedOnItsOwn ? own : firstStatus, line);
  }

  /** {@code " (the first failure the job's store records; rank 0, which exited with status 1, exited first)"}. */
  private static String firstFailure(int first, int firstStatus, GroupFailure stored, IntPredicate local) {
    return " (the first failure the job's store records" + (local.test(stored.rank()) ? "" : ", at a rank of another"
        + " node") + "; rank " + first + ", which " + Launcher.describe(firstStatus) + ", exited first)";
  }
}
