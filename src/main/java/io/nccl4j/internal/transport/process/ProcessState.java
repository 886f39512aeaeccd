package io.nccl4j.internal.transport.process;

import java.io.IOException;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;

/**
 * A process's and its threads' states as Linux tells them in {@code /proc/<pid>/stat} and
 * {@code /proc/<pid>/task/<tid>/stat}: what the shared memory's waits say of a late host-mate ("stopped: SIGSTOP or a
 * debugger", "running: …"), and how the launcher tells that a rank it started is stopped when its peers time out
 * waiting for it. The process's own state tells only of its first thread — a JVM's main thread, often parked in
 * {@code Work.waitFor} or on a future while another thread runs the collective or computes — so a host-mate is
 * described by the thread that runs its collective ({@link #currentThreadId}, which each rank publishes) and by its
 * threads that run.
 */
public final class ProcessState {
  private static final ThreadLocal<long[]> OWN_TID = ThreadLocal.withInitial(() -> new long[] {readOwnTid()});

  private ProcessState() {}

  /** The state letter of process {@code pid} (R, S, D, T, t, Z, …), or '?' when it cannot be read. */
  public static char of(long pid) {
    State s = read(Paths.get("/proc/" + pid + "/stat"));
    return s == null ? '?' : s.letter();
  }

  /** Whether {@code state} is a stopped process's: 'T' (SIGSTOP, SIGTSTP) or 't' (held by a debugger). */
  public static boolean stopped(char state) {
    return state == 'T' || state == 't';
  }

  /** This thread's id in the kernel (what {@code /proc/<pid>/task/} lists); 0 when it cannot be told. */
  public static long currentThreadId() {
    return OWN_TID.get()[0];
  }

  private static long readOwnTid() {
    try {
      String link = Files.readSymbolicLink(Paths.get("/proc/thread-self")).toString(); // "<pid>/task/<tid>"
      return Long.parseLong(link.substring(link.lastIndexOf('/') + 1));
    } catch (IOException | RuntimeException e) {
      return 0;
    }
  }

  /** A thread's (or a process's) state letter and name, from its {@code stat} file. */
  public record State(char letter, String name) {}

  /** The state of thread {@code tid} of process {@code pid}; null when it is gone, unknown (0) or cannot be read. */
  public static State thread(long pid, long tid) {
    return tid <= 0 ? null : read(Paths.get("/proc/" + pid + "/task/" + tid + "/stat"));
  }

  /** The names of the threads of {@code pid} that are running or runnable (state R), at most {@code max}. */
  public static List<String> running(long pid, int max) {
    List<String> names = new ArrayList<>();
    try (DirectoryStream<Path> tasks = Files.newDirectoryStream(Paths.get("/proc/" + pid + "/task"))) {
      for (Path t : tasks) {
        State s = read(t.resolve("stat"));
        if (s != null && s.letter() == 'R' && names.size() < max) {
          names.add(s.name());
        }
      }
    } catch (IOException | RuntimeException e) {
      // gone, or no /proc: nothing to tell
    }
    return names;
  }

  /** The state in {@code stat} and the name; null when it cannot be read. */
  private static State read(Path stat) {
    try {
      String s = Files.readString(stat);
      int open = s.indexOf('(');
      int close = s.lastIndexOf(')'); // the name may hold spaces and parentheses
      if (open < 0 || close < open || close + 2 >= s.length()) {
        return null;
      }
      return new State(s.charAt(close + 2), s.substring(open + 1, close));
    } catch (IOException | RuntimeException e) {
      return null;
    }
  }
}
