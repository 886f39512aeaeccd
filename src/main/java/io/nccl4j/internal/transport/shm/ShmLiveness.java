package io.nccl4j.internal.transport.shm;

import io.nccl4j.PeerFailureException;
import io.nccl4j.internal.transport.Failure;
import io.nccl4j.internal.transport.process.ProcessLink;
import io.nccl4j.internal.transport.process.ProcessState;
import io.nccl4j.internal.transport.process.StoredFailure;
import java.util.function.BooleanSupplier;

/**
 * Whether the processes a rank waits for through shared memory are still there: a peer that closed
 * its group marks its window words as left; one that died leaves its pid behind in its segment. A
 * wait looks every few milliseconds, so that no wait outlives a dead peer (docs/ERRORS.md).
 */
final class ShmLiveness {
  private final int rank;
  /** The group's segments and window words by rank, as {@link ProcessWindows} fills them in. */
  private final ShmSegment[] segments;
  private final long[] words;
  private final ProcessLink transport;

  ShmLiveness(int rank, ShmSegment[] segments, long[] words, ProcessLink transport) {
    this.rank = rank;
    this.segments = segments;
    this.words = words;
    this.transport = transport;
  }

  /**
   * Throws when rank {@code q}'s process (one whose segment this process mapped) has closed its group or
   * died and {@code stillAwaited} is then still true: looked at after the process is seen gone, so that
   * a peer that did what was awaited and then left is not taken for one that left first.
   */
  void check(int q, java.util.function.Supplier<String> what, BooleanSupplier stillAwaited) {
    ShmSegment s = segments[q];
    String gone = null;
    boolean closed = false;
    if (words[q] != 0 && ShmSegment.left(words[q])) {
      gone = "rank " + q + " closed its process group while rank " + rank + " was " + what.get();
      closed = true;
    } else {
      long pid = s.pid();
      if (pid != ProcessHandle.current().pid() && !alive(pid)) {
        gone = "rank " + q + " (pid " + pid + ") died while rank " + rank + " was " + what.get();
      }
    }
    if (gone != null && stillAwaited.getAsBoolean()) {
      if (closed) {
        // A rank closes its group as a consequence more often than as the cause (it found a mismatch and left; its
        // code threw inside try-with-resources, and it leaves that exception in the store after the close): a cause
        // that comes within the grace is what this rank reports. A dead process has no cause to leave.
        transport.stored().await(StoredFailure.GRACE_NANOS);
      }
      PeerFailureException e = new PeerFailureException(q, gone);
      transport.failures().record(Failure.of(q, e));
      throw transport.failures().failureOr(e);
    }
  }

  /**
   * What a peer that is late looks like from here, as words to append to its rank: {@code " (pid 12, stopped: SIGSTOP
   * or a debugger)"}; {@code " (pid 12, running: busy, or waiting for a core)"} — the thread that runs its collective
   * is on a core or queued for one: a peer that has not come although it runs is slow or was not scheduled, which on a
   * loaded machine can outlast a short timeout; {@code " (pid 12, running: its thread "worker" is busy, or waiting
   * for a core)"} — its collective's thread waits, for something that thread is running; {@code " (pid 12, asleep:
   * waiting for something else)"} — its collective's thread and every other waits; or {@code " (pid 12)"} when
   * nothing can be read. Read from the thread that runs the peer's collective ({@code tid}, which the peer publishes;
   * 0 when unknown), not from the process's state, which is its main thread's: a JVM's main thread is often parked on
   * a future while another thread works.
   */
  static String describe(long pid, long tid) {
    char process = ProcessState.of(pid);
    switch (process) {
      case 'T':
      case 't':
        return " (pid " + pid + ", stopped: SIGSTOP or a debugger)"; // a stop stops every thread
      case 'Z':
        return " (pid " + pid + ", exited)";
      case '?':
        return " (pid " + pid + ")";
      default:
        break;
    }
    ProcessState.State runner = ProcessState.thread(pid, tid);
    char state = runner != null ? runner.letter() : process;
    if (state == 'R') {
      return " (pid " + pid + ", running: busy, or waiting for a core)";
    }
    if (state == 'D') {
      return " (pid " + pid + ", in uninterruptible I/O or paging)";
    }
    java.util.List<String> running = ProcessState.running(pid, 3);
    if (!running.isEmpty()) {
      return " (pid " + pid + ", running: its thread" + (running.size() == 1 ? " \"" + running.get(0) + "\" is"
          : "s \"" + String.join("\", \"", running) + "\" are") + " busy, or waiting for a core)";
    }
    return state == 'S' ? " (pid " + pid + ", asleep: waiting for something else)" : " (pid " + pid + ")";
  }

  /** Running, or stopped: a zombie (killed, not yet reaped by its parent) is dead for its peers. */
  static boolean alive(long pid) {
    if (!ProcessHandle.of(pid).map(ProcessHandle::isAlive).orElse(false)) {
      return false;
    }
    return ProcessState.of(pid) != 'Z'; // '?' (no /proc): as the JDK says
  }
}
