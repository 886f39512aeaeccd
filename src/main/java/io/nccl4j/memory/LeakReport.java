package io.nccl4j.memory;

import io.nccl4j.Settings;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Consumer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.slf4j.helpers.NOPLoggerFactory;

/**
 * Where a leak is told, and what is done about it. The report is a warning through SLF4J, as
 * every other nccl4j warning, so that it reaches whatever logging the application configured; and
 * on System.err when no SLF4J provider is bound, where SLF4J would drop it without a word
 * (System.Logger would reach java.util.logging, which an application on logback or log4j does not
 * read).
 *
 * <p>{@code -Dnccl4j.leaks=} or {@code NCCL4J_LEAKS=}, a comma-separated list: {@code trace} makes
 * every owner and every allocator's block capture where it was allocated (a stack per allocation) so
 * that every report says where — the collector's, a rank's unclosed tensors, an allocator closed with
 * live blocks; {@code free} also frees a leaked tensor's memory when it is collected. Freeing is not the
 * default because the allocators' counts are exact and read at moments the program chooses (a
 * rank's strictMemory check, the memory experiment's steady and peak figures, a soak test's
 * baseline): a free at whatever moment the collector picks would move a process-wide count under
 * them, and could make a strictMemory check pass or fail by chance. Reported and left allocated, a
 * leak stays where those checks find it.
 */
public final class LeakReport {
  private static final Logger LOG = LoggerFactory.getLogger(LeakReport.class);
  private static final List<String> SETTING = List.of(setting().split(","));
  private static final AtomicLong COUNT = new AtomicLong();
  /** Settable by tests; the setting's {@code trace}. */
  static volatile boolean trace = SETTING.contains("trace");
  /** Settable by tests; the setting's {@code free}. */
  static volatile boolean free = SETTING.contains("free");
  /** For tests: sees every report's text. */
  static volatile Consumer<String> listener;

  private LeakReport() {}

  private static String setting() {
    String v = Settings.LEAKS_PROPERTY.get();
    if (v == null) {
      v = Settings.NCCL4J_LEAKS.get();
    }
    return v == null ? "" : v.replace(" ", "").toLowerCase(Locale.ROOT);
  }

  /** True under {@code nccl4j.leaks=trace} / {@code NCCL4J_LEAKS=trace}: owners capture their allocation site. */
  public static boolean tracing() {
    return trace;
  }

  /** True under {@code nccl4j.leaks=free} / {@code NCCL4J_LEAKS=free}: leaked tensors are freed when collected. */
  public static boolean freesOnCollect() {
    return free;
  }

  /** How many leaks this JVM has reported. */
  public static long count() {
    return COUNT.get();
  }

  /**
   * Tells a leak: as a warning through SLF4J, or on System.err ({@code nccl4j WARN …}) when no SLF4J provider is
   * bound; counted in {@link #count()}. For what nccl4j finds unclosed: a tensor the collector found, a rank of
   * {@code LocalCluster} that returned without closing its tensors.
   */
  public static void report(String message) {
    COUNT.incrementAndGet();
    // Asked at report time, not in a static initialiser, when SLF4J has finished choosing a provider.
    if (LoggerFactory.getILoggerFactory() instanceof NOPLoggerFactory) {
      System.err.println("nccl4j WARN " + message);
    } else {
      LOG.warn(message);
    }
    Consumer<String> l = listener;
    if (l != null) {
      l.accept(message);
    }
  }
}
