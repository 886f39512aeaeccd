package io.nccl4j.launch;

import io.nccl4j.Settings;
import java.util.Optional;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * A rank started by {@link Launcher} ends when the launcher dies, so that a SIGKILLed launcher
 * leaves no rank running and holding its ports. The launcher names itself in
 * {@link #LAUNCHER_PID}; a rank watches that process and, once it is gone, prints one line on
 * stderr and exits (status {@link #EXIT_STATUS}); shutdown hooks get {@link #HALT_AFTER_MILLIS}, then
 * the JVM halts. A rank that another launcher started (torchrun, Slurm, mpirun, a user's own) has
 * no such variable and is not watched.
 *
 * <p>Why the launcher's pid in a variable, not the other two usual signals: the rank's stdin pipe
 * cannot tell a dead launcher from a command that redirects or closes its own stdin
 * ({@code sh -c '… < /dev/null'} would exit at once), and Java cannot hand a child any other
 * descriptor; the parent pid is the wrong process when the command is a wrapper (./nccl4j, a shell)
 * and becomes init's or a subreaper's after the launcher dies. {@link ProcessHandle#isAlive} also
 * compares the process's start time, so a reused pid does not pass for the launcher.
 */
final class LauncherWatch {
  /** The variable the launcher sets in every rank's environment: its own pid. */
  static final String LAUNCHER_PID = "NCCL4J_LAUNCHER_PID";
  /** The exit status of a rank whose launcher died: the job failed (the CLI's 3). */
  static final int EXIT_STATUS = 3;
  static final long POLL_MILLIS = 250;
  static final long HALT_AFTER_MILLIS = 3000;

  private static final AtomicBoolean STARTED = new AtomicBoolean();

  private LauncherWatch() {}

  /** Starts watching, once per process, if this process was started by {@link Launcher}. */
  static void startIfLaunched(int rank) {
    String pid = Settings.NCCL4J_LAUNCHER_PID.get();
    if (pid == null || pid.isBlank() || !STARTED.compareAndSet(false, true)) {
      return;
    }
    long launcher;
    try {
      launcher = Long.parseLong(pid.trim());
    } catch (NumberFormatException e) {
      throw new IllegalStateException("rank " + rank + ": " + LAUNCHER_PID + " must be the launcher's pid, got '"
          + pid + "'");
    }
    Optional<ProcessHandle> handle = ProcessHandle.of(launcher);
    if (handle.isEmpty() || !handle.get().isAlive()) {
      exit(rank, launcher);
    }
    ProcessHandle h = handle.get();
    Thread t = new Thread(() -> {
      while (h.isAlive()) {
        try {
          Thread.sleep(POLL_MILLIS);
        } catch (InterruptedException e) {
          return;
        }
      }
      exit(rank, launcher);
    }, "nccl4j-launcher-watch");
    t.setDaemon(true);
    t.start();
  }

  /** True once this process watches its launcher. */
  static boolean watching() {
    return STARTED.get();
  }

  private static void exit(int rank, long launcher) {
    System.err.println("nccl4j: rank " + rank + ": the launcher that started it (pid " + launcher
        + ") has died; exiting with status " + EXIT_STATUS + " to release this rank's ports and memory");
    System.err.flush();
    Thread halt = new Thread(() -> {
      try {
        Thread.sleep(HALT_AFTER_MILLIS);
      } catch (InterruptedException e) {
        // halting now
      }
      Runtime.getRuntime().halt(EXIT_STATUS);
    }, "nccl4j-launcher-watch-halt");
    halt.setDaemon(true);
    halt.start();
    System.exit(EXIT_STATUS);
  }
}
