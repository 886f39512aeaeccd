package io.nccl4j.internal.transport;

import io.nccl4j.BackendException;
import io.nccl4j.TransportTimeoutException;
import io.nccl4j.internal.concurrent.Backoff;
import io.nccl4j.internal.transport.WindowWords.Counter;
import java.util.ArrayList;
import java.util.List;
import java.util.function.BooleanSupplier;
import java.util.function.Supplier;

/**
 * The window protocol, once for threads and processes: members publish, count themselves in, wait for
 * each other, work on each other's buffers, count themselves out, and wait again before leaving — over
 * {@link WindowWords}, whatever holds them. Every wait has the collective's deadline, and looks, as it
 * waits, at the group's failure and at whether the members it still waits for are there; so a member
 * that died, closed its group or froze (SIGSTOP, a debugger, a long pause) fails every other member
 * within the timeout, naming it — entering a window, and leaving one.
 *
 * <p>Giving up on an arrival withdraws this member with a compare-and-set that fails once the last
 * member has arrived, so that either every member enters the window or none does. Giving up on a
 * departure — some member is still inside — aborts the window's departure counter, so that every
 * member still waiting fails too, rather than one leaving and the others waiting on.
 *
 * <p>The counters are range-checked as they are read: while a member waits in use {@code u} of a
 * slot, the slot's arrivals lie between its own count and {@code u}'s target, and so do the
 * departures while it leaves (no member can count itself into use {@code u + 2} before every member
 * counted itself into {@code u + 1}); a value outside, or one smaller than seen before, can only be a
 * stray write, and fails the group naming the words as corrupt instead of letting a window open or
 * close early over wrong data.
 */
public final class WindowProtocol {
  /** The members of the windows, as the protocol needs them besides the words. */
  public interface Members {
    /** How many members the windows have. */
    int size();

    /** This member's index. */
    int me();

    /** The group's rank of member {@code q}, as messages name it. */
    int rank(int q);

    /** Throws the group's failure, if one was recorded (wherever the group keeps it). */
    void checkFailed();

    /**
     * Throws when member {@code q} has gone — closed its group, or its process died — and
     * {@code stillAwaited} then holds ({@code what}: what this member was doing, told only then: the check runs
     * on every round of a wait, so it builds no string).
     */
    void checkPresent(int q, Supplier<String> what, BooleanSupplier stillAwaited);

    /**
     * Throws when member {@code q}, not yet at {@code tag}'s window, waits for the same collective in a
     * message instead: ranks that disagree on the collective may otherwise wait for each other with
     * nothing between them to compare. Nothing to check where the transport cannot tell.
     */
    default void checkNotElsewhere(int q, TransferTag tag) {}

    /**
     * The error for a window a peer aborted: the group's failure, which the peer records a moment
     * later (waited for briefly), else {@code fallback}.
     */
    RuntimeException failureBehindAbort(String fallback);

    /** What more is known of late member {@code q}, as words to append (" (pid 12, stopped)"), or "". */
    default String state(int q) {
      return "";
    }

    /** What holds the words, for a report of corruption ("shared memory segment /dev/shm/…"). */
    String wordsName();
  }

  private final WindowWords words;
  private final Members members;
  /**
   * Set when this member stopped waiting to leave a window while others were still inside it (they timed out,
   * froze, or the group failed): they may still write this member's buffers.
   */
  private volatile boolean leftWithMembersInside;

  public WindowProtocol(WindowWords words, Members members) {
    this.words = words;
    this.members = members;
  }

  /**
   * Whether this member left a window while others were still inside it: what they write into its buffers
   * afterwards must not land in memory that was freed and handed out again.
   */
  public boolean leftWithMembersInside() {
    return leftWithMembersInside;
  }

  /** What use {@code use}'s counters reach once every member has counted itself. */
  public long target(long use) {
    return ((use >> 1) + 1) * members.size();
  }

  /**
   * Counts this member into window use {@code use} — its publication and arrival mark written — and
   * waits until every member has; throws, with nobody entering, when the group fails, a member goes, a
   * counter is corrupt, or {@code deadline} passes first.
   */
  public void arrive(long use, TransferTag tag, long deadline) {
    int parity = (int) (use & 1);
    long target = target(use);
    long v = words.increment(Counter.ARRIVED, parity);
    if (WindowWords.count(v) == target) {
      words.wakeAll(Counter.ARRIVED, parity);
    }
    await(Counter.ARRIVED, use, tag, deadline, WindowWords.count(v));
  }

  /**
   * Counts this member out of window use {@code use}; with {@code barrier}, waits until every member
   * has, so that no peer touches this member's buffers afterwards. Throws as {@link #arrive} does —
   * the window then aborted, so that every member still inside fails too — or when a peer abandoned
   * the window (its part of the buffers may be unwritten).
   */
  public void leave(long use, TransferTag tag, long deadline, boolean barrier) {
    int parity = (int) (use & 1);
    long target = target(use);
    words.markLeft(members.me(), use);
    long v = words.increment(Counter.LEFT, parity);
    if (WindowWords.count(v) == target) {
      words.wakeAll(Counter.LEFT, parity);
    }
    if (barrier) {
      await(Counter.LEFT, use, tag, deadline, WindowWords.count(v));
    }
  }

  /**
   * Leaves window use {@code use} after a failure inside it: every member still waiting to leave,
   * and every later one, fails instead of returning as if the collective were done.
   */
  public void abandon(long use) {
    abort(Counter.LEFT, (int) (use & 1));
  }

  private void abort(Counter c, int parity) {
    long v;
    do {
      v = words.get(c, parity);
    } while (!WindowWords.aborted(v) && !words.compareAndSet(c, parity, v, v | WindowWords.ABORTED));
    words.wakeAll(c, parity);
  }

  /**
   * Withdraws this member from the arrival of {@code use}: true if the window will not open (every
   * member then fails), false if it completed meanwhile (it is open after all).
   */
  private boolean withdraw(int parity, long target) {
    while (true) {
      long v = words.get(Counter.ARRIVED, parity);
      if (WindowWords.count(v) >= target) {
        return false;
      }
      if (WindowWords.aborted(v) || words.compareAndSet(Counter.ARRIVED, parity, v, v | WindowWords.ABORTED)) {
        words.wakeAll(Counter.ARRIVED, parity);
        return true;
      }
    }
  }

  /** Waits until counter {@code c} of {@code use} is complete; {@code mine}: the count this member's increment made. */
  private void await(Counter c, long use, TransferTag tag, long deadline, long mine) {
    int parity = (int) (use & 1);
    long target = target(use);
    Backoff backoff = words.backoff();
    long interval = words.checkIntervalNanos();
    long nextCheck = System.nanoTime() + interval;
    long last = mine;
    long v;
    for (int round = 0; WindowWords.count(v = words.get(c, parity)) < target; round++) {
      if (WindowWords.aborted(v)) {
        if (c == Counter.LEFT) {
          leftWithMembersInside = true; // a peer failed inside; others may still be working
        }
        throw members.failureBehindAbort(c == Counter.ARRIVED
            ? "a rank gave up waiting for " + tag + "; the group failed"
            : "a rank failed inside the window of " + tag + "; the group failed");
      }
      long count = WindowWords.count(v);
      if (count < last) {
        throw corrupt(c, use, "reads " + count + " after " + last + "; it only grows");
      }
      last = count;
      long now = System.nanoTime();
      if (now - nextCheck >= 0) {
        nextCheck = now + interval;
        try {
          hopeless(c, use, tag, deadline, now);
        } catch (RuntimeException e) {
          if (c == Counter.ARRIVED) {
            if (withdraw(parity, target)) {
              throw e;
            }
          } else if (WindowWords.count(words.get(c, parity)) < target) {
            leftWithMembersInside = true;
            abort(Counter.LEFT, parity);
            throw e;
          }
          break; // every member arrived, or left, meanwhile: done after all
        }
      }
      if (backoff.parks(round)) {
        words.sleep(c, parity, members.me(), v, Math.min(deadline, nextCheck));
      } else {
        backoff.pause(round, deadline);
      }
    }
    if (WindowWords.aborted(v)) {
      // Completed by later members after one gave up (arrival) or failed inside (departure): failed all the same.
      throw members.failureBehindAbort(c == Counter.ARRIVED
          ? "a rank gave up waiting for " + tag + "; the group failed"
          : "a rank failed inside the window of " + tag + "; the group failed");
    }
    if (WindowWords.count(v) > target) {
      throw corrupt(c, use, "reads " + WindowWords.count(v) + ", more than the " + target + " members' counts"
          + " it can have reached");
    }
  }

  /** Throws if the wait cannot end well: the group failed, a member is gone or elsewhere, or the deadline passed. */
  private void hopeless(Counter c, long use, TransferTag tag, long deadline, long now) {
    members.checkFailed();
    int me = members.me();
    for (int q = 0; q < members.size(); q++) {
      if (q == me || words.marked(c, q, use)) {
        continue;
      }
      int member = q;
      // A member may do what is awaited and then leave between the look above and this check.
      members.checkPresent(q, () -> (c == Counter.ARRIVED ? "waiting in " : "leaving its window of ") + tag
          + " for rank " + members.rank(member), () -> !words.marked(c, member, use));
      if (c == Counter.ARRIVED) {
        members.checkNotElsewhere(q, tag);
      }
    }
    if (now - deadline > 0) {
      List<Integer> late = new ArrayList<>();
      for (int q = 0; q < members.size(); q++) {
        if (q != me && !words.marked(c, q, use)) {
          late.add(q);
        }
      }
      throw timeout(c, tag, late);
    }
  }

  private RuntimeException timeout(Counter c, TransferTag tag, List<Integer> late) {
    if (late.isEmpty()) {
      // Every member's mark says it did what the counter still waits for: a mark or the counter was overwritten.
      return new BackendException(members.wordsName() + " is corrupt (every rank's mark says it "
          + (c == Counter.ARRIVED ? "reached " : "left its window of ") + tag + ", but the "
          + c.name().toLowerCase(java.util.Locale.ROOT) + " counter has not counted them)");
    }
    StringBuilder who = new StringBuilder(late.size() == 1 ? "rank " : "ranks ");
    for (int i = 0; i < late.size(); i++) {
      int q = late.get(i);
      who.append(i == 0 ? "" : ", ").append(members.rank(q)).append(members.state(q));
    }
    String what = "waiting for " + who + " to " + c.awaited + " " + tag;
    if (c == Counter.LEFT) {
      what += " (every rank entered it; " + (late.size() == 1 ? "that rank is" : "those ranks are")
          + " still inside)";
    }
    return new TransportTimeoutException(what);
  }

  private BackendException corrupt(Counter c, long use, String what) {
    return new BackendException(members.wordsName() + " is corrupt (the " + c.name().toLowerCase(java.util.Locale.ROOT)
        + " counter of window #" + use + " " + what + ")");
  }
}
