package io.nccl4j.internal.transport.process;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Paths;

/**
 * A process's state as Linux tells it in {@code /proc/<pid>/stat}: what the shared memory's waits say of a late
 * host-mate ("stopped: SIGSTOP or a debugger", "running: …"), and how the launcher tells that a rank it started is
 * stopped when its peers time out waiting for it.
 */
public final class ProcessState {
  private ProcessState() {}

  /** The state letter of process {@code pid} (R, S, D, T, t, Z, …), or '?' when it cannot be read. */
  public static char of(long pid) {
    try {
      String stat = Files.readString(Paths.get("/proc/" + pid + "/stat"));
      int close = stat.lastIndexOf(')'); // after the command name, which may hold spaces
      return close < 0 || close + 2 >= stat.length() ? '?' : stat.charAt(close + 2);
    } catch (IOException | RuntimeException e) {
      return '?';
    }
  }

  /** Whether {@code state} is a stopped process's: 'T' (SIGSTOP, SIGTSTP) or 't' (held by a debugger). */
  public static boolean stopped(char state) {
    return state == 'T' || state == 't';
  }
}
