package io.nccl4j.internal.transport.shm;

import io.nccl4j.Settings;
import java.io.IOException;

/**
 * Fault injection for the tests of processes sharing memory (off unless set): with
 * {@code -Dnccl4j.fault.stopInWindow=N}, this process stops itself with SIGSTOP right after every rank
 * arrived at its window number N (counted from 0 per group), inside the window — what a debugger, a long
 * pause or a frozen VM does to a host-mate at the worst moment, and what a test cannot time from outside.
 * The process goes on where it stopped when it gets SIGCONT.
 */
final class WindowFaults {
  private static final long STOP_IN_WINDOW = Settings.FAULT_STOP_IN_WINDOW_PROPERTY.longValue(-1);

  /** How long after asking for its stop the process stays inside the window, whatever kill(1) reported. */
  private static final long STOP_LANDS_NANOS = 500_000_000L;

  private WindowFaults() {}

  /** Called inside window {@code use} of {@code tag}, after every rank arrived. */
  static void arrived(long use, Object tag) {
    if (use != STOP_IN_WINDOW) {
      return;
    }
    // Said first, so that a test can tell which window the process stopped in from what its peers report.
    System.err.println("nccl4j.fault.stopInWindow: stopping inside window #" + use + " (" + tag + ")");
    System.err.flush();
    long asked = System.nanoTime();
    Process kill;
    try {
      kill = new ProcessBuilder("kill", "-STOP", Long.toString(ProcessHandle.current().pid())).inheritIO().start();
    } catch (IOException e) {
      throw new IllegalStateException("nccl4j.fault.stopInWindow: cannot run kill -STOP: " + e.getMessage(), e);
    }
    // kill(1) stops this process while this thread waits for it; SIGCONT lets the wait end. The wait does not
    // end on an interrupt: returning before kill(1) ran would leave the window and stop somewhere else.
    boolean interrupted = false;
    while (true) {
      try {
        kill.waitFor();
        break;
      } catch (InterruptedException e) {
        interrupted = true;
      }
    }
    // kill(1) has ended, but the stop may not have landed yet: the signal reaches each thread of the JVM on its way
    // back to user code, and on a loaded machine this thread can run on for a moment first — out of the window, where
    // the peers no longer wait for it (seen in CI). Stay inside at least half a second after asking: the stop lands
    // meanwhile, and a process that was stopped (for seconds, as the tests hold it) finds the time passed.
    while (System.nanoTime() - asked < STOP_LANDS_NANOS) {
      try {
        Thread.sleep(10);
      } catch (InterruptedException e) {
        interrupted = true;
      }
    }
    if (interrupted) {
      Thread.currentThread().interrupt();
    }
  }
}
