package io.nccl4j;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowable;

import com.tngtech.archunit.core.domain.JavaClass;
import com.tngtech.archunit.core.domain.JavaModifier;
import com.tngtech.archunit.core.importer.ClassFileImporter;
import com.tngtech.archunit.core.importer.ImportOption;
import io.nccl4j.memory.Allocator;
import io.nccl4j.nccl.NcclException;
import io.nccl4j.nccl.NcclUsageException;
import io.nccl4j.nccl.cuda.CudaException;
import io.nccl4j.spi.Backend;
import io.nccl4j.spi.Collective;
import io.nccl4j.store.StoreTimeoutException;
import io.nccl4j.testing.TestTime;
import java.lang.reflect.Field;
import java.lang.reflect.Modifier;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;
import java.util.concurrent.CompletableFuture;
import java.util.function.Supplier;
import java.util.stream.Stream;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Every failure type nccl4j throws keeps its type, its details and its message (once) wherever it
 * is caught and thrown again: on the thread that waits for a failed Work (blocking and async), for
 * the later operations of the group it broke, and out of {@link LocalCluster#run} as the cause of
 * its {@link RankFailedException}. The types are found by scanning the main classes, so that a new
 * subclass without a factory here, or without the override that keeps its type, fails this test.
 */
@Tag("multirank")
class ExceptionTypesSurviveTest {
  /** One distinctive instance of every concrete failure type: the registry the scan is checked against. */
  private static final Map<Class<?>, Supplier<RuntimeException>> FACTORIES = new LinkedHashMap<>();

  static {
    FACTORIES.put(BackendException.class, () -> new BackendException("a distinctive backend failure"));
    FACTORIES.put(PeerFailureException.class, () -> new PeerFailureException(3, "rank 3 failed: a distinctive cause"));
    FACTORIES.put(CollectiveTimeoutException.class,
        () -> new CollectiveTimeoutException("Watchdog caught a distinctive timeout", 2));
    FACTORIES.put(CollectiveMismatchException.class,
        () -> new CollectiveMismatchException("rank 1 is running a distinctive ALLREDUCE"));
    FACTORIES.put(StoreTimeoutException.class, () -> new StoreTimeoutException("a distinctive store wait ran out"));
    FACTORIES.put(NcclException.class, () -> new NcclException(3, "ncclAllReduce failed distinctively"));
    FACTORIES.put(CudaException.class, () -> new CudaException(700, "cudaMemcpy failed distinctively"));
    FACTORIES.put(UsageException.class, () -> new UsageException("a distinctive mistake", "expected 4, got 5"));
    FACTORIES.put(NcclUsageException.class,
        () -> new NcclUsageException(4, "ncclInvalidArgument distinctively", "count 0", false));
  }

  static Stream<Class<?>> failureTypes() {
    return FACTORIES.keySet().stream();
  }

  @Test
  void theRegistryCoversEveryFailureTypeOfTheLibrary() {
    TreeSet<String> found = new TreeSet<>();
    for (JavaClass c : new ClassFileImporter().withImportOption(ImportOption.Predefined.DO_NOT_INCLUDE_TESTS)
        .importPackages("io.nccl4j")) {
      boolean failure = c.isAssignableTo(BackendException.class) || c.isAssignableTo(UsageException.class);
      if (failure && !c.getModifiers().contains(JavaModifier.ABSTRACT)) {
        found.add(c.getName());
      }
    }
    TreeSet<String> registered = new TreeSet<>();
    FACTORIES.keySet().forEach(k -> registered.add(k.getName()));
    assertThat(found).as("BackendException and UsageException types in the main classes").contains(
        BackendException.class.getName(), UsageException.class.getName(), CudaException.class.getName());
    assertThat(registered).as("give every failure type a factory here").isEqualTo(found);
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("failureTypes")
  void aFailedBlockingCallThrowsTheSameType(Class<?> type) {
    RuntimeException original = FACTORIES.get(type).get();
    try (ProcessGroup pg = ProcessGroup.create(new FailingBackend(original)); Tensor t = pg.zeros(4, DType.FLOAT32)) {
      Throwable caught = catchThrowable(() -> pg.allReduce(t, ReduceOp.SUM));
      assertSameFailure(caught, original);
    }
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("failureTypes")
  void aFailedAsyncWorkThrowsTheSameTypeFromEveryWait(Class<?> type) {
    RuntimeException original = FACTORIES.get(type).get();
    try (ProcessGroup pg = ProcessGroup.create(new FailingBackend(original)); Tensor t = pg.zeros(4, DType.FLOAT32)) {
      Work w = pg.allReduceAsync(t, ReduceOp.SUM);
      assertSameFailure(catchThrowable(w::waitFor), original);
      assertSameFailure(catchThrowable(() -> w.waitFor(TestTime.seconds(60))), original);
      assertThat(w.exception()).containsSame(original);
    }
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("failureTypes")
  void aRankTaskThrowingItReachesTheCallerOfRunAsTheCause(Class<?> type) {
    RuntimeException original = FACTORIES.get(type).get();
    Throwable caught = catchThrowable(() -> LocalCluster.of(2).timeout(TestTime.seconds(60)).run(pg -> {
      if (pg.rank() == 1) {
        throw original;
      }
      try (Tensor t = pg.zeros(4, DType.FLOAT32)) {
        pg.allReduce(t, ReduceOp.SUM);
      }
    }));
    assertThat(caught).isExactlyInstanceOf(RankFailedException.class);
    RankFailedException e = (RankFailedException) caught;
    assertThat(e.rank()).isEqualTo(1);
    assertThat(e.getCause()).isSameAs(original);
    assertThat(occurrences(e.getMessage(), original.getMessage())).as(e.getMessage()).isEqualTo(1);
    // The rank that waited for it was told which rank failed, quoting it (a report of another rank's
    // failure or timeout is passed on as it is).
    assertThat(e.getSuppressed()).hasSize(1);
    boolean echo = original instanceof PeerFailureException || original instanceof CollectiveTimeoutException;
    assertThat(e.getSuppressed()[0].getMessage()).contains(echo ? original.getMessage()
        : "rank 1 failed: " + type.getSimpleName() + ": " + original.getMessage());
  }

  /** Same class, same message (not repeated), same details; caused by the original or the original itself. */
  private static void assertSameFailure(Throwable caught, RuntimeException original) {
    assertThat(caught).as("caught").isExactlyInstanceOf(original.getClass());
    assertThat(caught.getMessage()).isEqualTo(original.getMessage());
    if (caught != original) {
      assertThat(caught).hasRootCause(original);
    }
    for (Field f : detailFields(original.getClass())) {
      try {
        assertThat(f.get(caught)).as("%s.%s", f.getDeclaringClass().getSimpleName(), f.getName())
            .isEqualTo(f.get(original));
      } catch (IllegalAccessException e) {
        throw new AssertionError(e);
      }
    }
  }

  /** The instance fields nccl4j's exception classes add to RuntimeException's. */
  private static List<Field> detailFields(Class<?> type) {
    List<Field> fields = new ArrayList<>();
    for (Class<?> c = type; c != RuntimeException.class && c != IllegalArgumentException.class; c = c.getSuperclass()) {
      for (Field f : c.getDeclaredFields()) {
        if (!Modifier.isStatic(f.getModifiers())) {
          f.setAccessible(true);
          fields.add(f);
        }
      }
    }
    return fields;
  }

  private static int occurrences(String text, String part) {
    int n = 0;
    for (int at = text.indexOf(part); at >= 0; at = text.indexOf(part, at + 1)) {
      n++;
    }
    return n;
  }

  /** A rank of one whose every operation fails with the given exception, from another thread. */
  private static final class FailingBackend implements Backend {
    private final RuntimeException failure;
    private final Allocator allocator = Allocator.host().child("types-survive");

    FailingBackend(RuntimeException failure) {
      this.failure = failure;
    }

    @Override
    public Identity identity() {
      return new Identity("failing", 0, 1, Device.cpu(), allocator, TestTime.seconds(60));
    }

    @Override
    public void submit(Collective collective, boolean callerWaits, Completion completion) {
      // Reported from another thread, as a backend's completion usually is.
      CompletableFuture.runAsync(() -> completion.completed(null, failure));
    }

    @Override
    public void abort(BackendException cause) {}

    @Override
    public void close() {
      allocator.close();
    }
  }
}
