package io.nccl4j.cli.bench;

import java.io.IOException;
import java.io.PrintStream;
import java.nio.file.Files;
import java.nio.file.Path;
import me.tongfei.progressbar.ConsoleProgressBarConsumer;
import me.tongfei.progressbar.ProgressBar;
import me.tongfei.progressbar.ProgressBarBuilder;
import me.tongfei.progressbar.ProgressBarStyle;

/**
 * Progress on stderr for runs that take more than a few seconds, and only when stderr is a terminal: there the bar
 * rewrites one line in place; piped or captured (a log, CI, a test) every update would be a line of its own, so
 * nothing is written. Nothing is shown until 2 s have passed, so quick runs stay quiet. Thread-safe; only the
 * reporting process should create one.
 */
public final class Progress implements AutoCloseable {
  private static final long SHOW_AFTER_NANOS = 2_000_000_000L;

  private final String task;
  private final long total;
  private final long start = System.nanoTime();
  private final boolean enabled;
  private final long showAfterNanos;
  private final PrintStream err;
  private long done;
  private ProgressBar bar;

  /** On {@code System.err}, when {@code enabled} (the reporting rank) and stderr is a terminal. */
  public Progress(String task, long total, boolean enabled) {
    this(task, total, enabled && stderrIsTerminal(), SHOW_AFTER_NANOS, System.err);
  }

  public Progress(String task, long total, boolean enabled, long showAfterNanos, PrintStream err) {
    this.task = task;
    this.total = total;
    this.enabled = enabled;
    this.showAfterNanos = showAfterNanos;
    this.err = err;
  }

  /**
   * Whether this process's stderr is a terminal (Linux: file descriptor 2 is a tty or pseudo-terminal). The JDK can
   * tell only of stdin and stdout together ({@code System.console()}), and a command whose output is piped may
   * still show its progress on the terminal.
   */
  public static boolean stderrIsTerminal() {
    return isTerminal(Path.of("/proc/self/fd/2"));
  }

  public static boolean isTerminal(Path fd) {
    try {
      String target = Files.readSymbolicLink(fd).toString();
      return target.startsWith("/dev/pts/") || target.startsWith("/dev/tty") || target.equals("/dev/console");
    } catch (IOException | UnsupportedOperationException | SecurityException e) {
      return false;
    }
  }

  public synchronized void step(String extra) {
    done++;
    if (!enabled) {
      return;
    }
    if (bar == null && System.nanoTime() - start >= showAfterNanos) {
      bar = new ProgressBarBuilder().setTaskName(task).setInitialMax(total).setStyle(ProgressBarStyle.ASCII)
          .setConsumer(new ConsoleProgressBarConsumer(err)).build();
    }
    if (bar != null) {
      bar.stepTo(done);
      bar.setExtraMessage(extra);
    }
  }

  /** Steps counted so far. */
  public synchronized long done() {
    return done;
  }

  @Override
  public synchronized void close() {
    if (bar != null) {
      bar.close();
    }
  }
}
