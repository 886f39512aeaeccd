package io.nccl4j.samples;

import me.tongfei.progressbar.ProgressBar;
import me.tongfei.progressbar.ProgressBarBuilder;
import me.tongfei.progressbar.ProgressBarStyle;

/**
 * Progress on stderr for runs that take more than a few seconds: nothing is shown until 2 s have
 * passed, so quick runs stay quiet. Thread-safe; only the reporting process should create one.
 */
final class Progress implements AutoCloseable {
  private static final long SHOW_AFTER_NANOS = 2_000_000_000L;

  private final String task;
  private final long total;
  private final long start = System.nanoTime();
  private final boolean enabled;
  private long done;
  private ProgressBar bar;

  Progress(String task, long total, boolean enabled) {
    this.task = task;
    this.total = total;
    this.enabled = enabled;
  }

  synchronized void step(String extra) {
    done++;
    if (!enabled) {
      return;
    }
    if (bar == null && System.nanoTime() - start > SHOW_AFTER_NANOS) {
      bar = new ProgressBarBuilder().setTaskName(task).setInitialMax(total).setStyle(ProgressBarStyle.ASCII)
          .setConsumer(new me.tongfei.progressbar.ConsoleProgressBarConsumer(System.err)).build();
    }
    if (bar != null) {
      bar.stepTo(done);
      bar.setExtraMessage(extra);
    }
  }

  @Override
  public synchronized void close() {
    if (bar != null) {
      bar.close();
    }
  }
}
