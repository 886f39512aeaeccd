package io.nccl4j.testing;

import java.time.Duration;
import java.time.LocalTime;
import java.time.temporal.ChronoUnit;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.platform.engine.TestExecutionResult;
import org.junit.platform.engine.support.descriptor.ClassSource;
import org.junit.platform.launcher.TestExecutionListener;
import org.junit.platform.launcher.TestIdentifier;
import org.junit.platform.launcher.TestPlan;

/**
 * Says what a long test run is doing at least once a minute. Surefire prints a line when a class
 * starts and when it ends; a class of thousands of dynamic cases (the conformance suites) or one
 * multi-process test can run for minutes between the two, and a run that sits silent looks hung.
 * While one class has been running for a minute or more, this prints, every minute, the class, how
 * many of its tests finished (and failed), and the test running now. Registered through
 * {@code META-INF/services}, so every test run (Maven or IDE) has it; it prints nothing for a run
 * whose classes each take under a minute.
 */
public final class ProgressListener implements TestExecutionListener {
  private static final long PERIOD_SECONDS = Long.getLong("nccl4j.test.progress.seconds", 60);

  private final AtomicReference<String> currentClass = new AtomicReference<>();
  private final AtomicReference<String> currentTest = new AtomicReference<>();
  private final AtomicLong classStartNanos = new AtomicLong();
  private final AtomicLong done = new AtomicLong();
  private final AtomicLong failed = new AtomicLong();
  private ScheduledExecutorService ticker;
  private TestPlan plan;

  @Override
  public void testPlanExecutionStarted(TestPlan testPlan) {
    plan = testPlan;
    ticker = Executors.newSingleThreadScheduledExecutor(r -> {
      Thread t = new Thread(r, "nccl4j-test-progress");
      t.setDaemon(true);
      return t;
    });
    ticker.scheduleAtFixedRate(this::report, PERIOD_SECONDS, PERIOD_SECONDS, TimeUnit.SECONDS);
  }

  @Override
  public void testPlanExecutionFinished(TestPlan testPlan) {
    if (ticker != null) {
      ticker.shutdownNow();
    }
  }

  @Override
  public void executionStarted(TestIdentifier id) {
    if (isClass(id)) {
      currentClass.set(simpleName(id));
      classStartNanos.set(System.nanoTime());
      done.set(0);
      failed.set(0);
    } else if (id.isTest()) {
      currentTest.set(path(id));
    }
  }

  @Override
  public void executionFinished(TestIdentifier id, TestExecutionResult result) {
    if (isClass(id)) {
      currentClass.set(null);
      currentTest.set(null);
    } else if (id.isTest()) {
      done.incrementAndGet();
      if (result.getStatus() != TestExecutionResult.Status.SUCCESSFUL) {
        failed.incrementAndGet();
      }
    }
  }

  private void report() {
    String cls = currentClass.get();
    if (cls == null) {
      return;
    }
    Duration running = Duration.ofNanos(System.nanoTime() - classStartNanos.get());
    if (running.getSeconds() < PERIOD_SECONDS) {
      return;
    }
    String test = currentTest.get();
    System.out.printf("[progress %s] %s: running %d min, %d test(s) done, %d failed%s%n",
        LocalTime.now().truncatedTo(ChronoUnit.SECONDS), cls, running.toMinutes(), done.get(), failed.get(),
        test == null ? "" : "; now: " + test);
    System.out.flush();
  }

  private static boolean isClass(TestIdentifier id) {
    return id.getSource().filter(ClassSource.class::isInstance).isPresent();
  }

  private static String simpleName(TestIdentifier id) {
    return id.getSource().map(s -> ((ClassSource) s).getClassName()).map(n -> n.substring(n.lastIndexOf('.') + 1))
        .orElse(id.getDisplayName());
  }

  /** The test's display names from its class down, e.g. "allReduce() › world size 4 › float32 › count 7, SUM". */
  private String path(TestIdentifier id) {
    StringBuilder b = new StringBuilder(id.getDisplayName());
    TestIdentifier at = id;
    while (plan != null) {
      TestIdentifier parent = plan.getParent(at).orElse(null);
      if (parent == null || isClass(parent)) {
        break;
      }
      b.insert(0, parent.getDisplayName() + " › ");
      at = parent;
    }
    return b.toString();
  }
}
