package io.nccl4j.internal.transport.shm;

import java.io.IOException;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;

/**
 * What a host-mate's process and its threads are doing, read from {@code /proc}: what a rank that waits for it says
 * about it when its wait times out. The process's own state tells only of its first thread — a JVM's main thread,
 * which is often parked in {@code Work.waitFor} or on a future while another thread runs the collective or computes
 * — so a peer is described by the thread that runs its collective ({@link #currentThreadId}, which each rank
 * publishes in its window words as it starts a collective), and by its threads that are running.
 */
final class ProcStates {
  private static final ThreadLocal<long[]> OWN_TID = ThreadLocal.withInitial(() -> new long[] {readOwnTid()});

  private ProcStates() {}

  /** This thread's id in the kernel (what {@code /proc/<pid>/task/} lists); 0 when it cannot be told. */
  static long currentThreadId() {
    return OWN_TID.get()[0];
  }

  private static long readOwnTid() {
    try {
      // "<pid>/task/<tid>"
      String link = Files.readSymbolicLink(Paths.get("/proc/thread-self")).toString();
      return Long.parseLong(link.substring(link.lastIndexOf('/') + 1));
    } catch (IOException | RuntimeException e) {
      return 0;
    }
  }

  /** A thread's (or a process's) state letter and name, from its {@code stat} file. */
  record State(char letter, String name) {}

  /** The state in {@code stat} (R, S, D, T, t, Z, …) and the name; null when it cannot be read. */
  static State read(Path stat) {
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

  /** The state letter of process {@code pid}, or '?' when it cannot be read. */
  static char process(long pid) {
    State s = read(Paths.get("/proc/" + pid + "/stat"));
    return s == null ? '?' : s.letter();
  }

  /** The state of thread {@code tid} of process {@code pid}; null when it is gone or cannot be read. */
  static State thread(long pid, long tid) {
    return tid <= 0 ? null : read(Paths.get("/proc/" + pid + "/task/" + tid + "/stat"));
  }

  /** The names of the threads of {@code pid} that are running (state R), at most {@code max}. */
  static List<String> running(long pid, int max) {
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
}
