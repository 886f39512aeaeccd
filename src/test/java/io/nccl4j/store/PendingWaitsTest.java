package io.nccl4j.store;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.List;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * The rules by which PyTorch's libuv server releases the waits it has not answered, which {@link PendingWaits}
 * follows (measured against torch 2.13's server, PyTorchStoreTest): a write releases a key for every wait on it, a
 * push for the waits on it in the order they came until one is done, a cancelled wait takes nothing.
 */
@Tag("unit")
class PendingWaitsTest {
  private final PendingWaits waits = new PendingWaits();

  @Test
  void aWriteReleasesTheKeyForEveryWaitOnIt() {
    PendingWaits.Wait a = waits.add(List.of("k"));
    PendingWaits.Wait b = waits.add(List.of("k"));
    PendingWaits.Wait other = waits.add(List.of("other"));
    assertThat(a.done()).isFalse();
    waits.written("k");
    assertThat(a.done()).isTrue();
    assertThat(b.done()).isTrue();
    assertThat(other.done()).isFalse();
  }

  @Test
  void aWaitForSeveralKeysIsDoneWhenEachWasWritten() {
    PendingWaits.Wait w = waits.add(List.of("x", "y"));
    waits.written("x");
    waits.written("x");
    assertThat(w.done()).as("x twice is not y").isFalse();
    waits.written("y");
    assertThat(w.done()).isTrue();
  }

  @Test
  void aPushReleasesTheFirstWaitOnTheQueueOnly() {
    PendingWaits.Wait first = waits.add(List.of("q"));
    PendingWaits.Wait second = waits.add(List.of("q"));
    waits.pushed("q");
    assertThat(first.done()).isTrue();
    assertThat(second.done()).isFalse();
    waits.pushed("q");
    assertThat(second.done()).isTrue();
    PendingWaits.Wait third = waits.add(List.of("q"));
    waits.pushed("q");
    assertThat(third.done()).as("the ones released took no further push").isTrue();
  }

  @Test
  void aPushCountsForAWaitOfSeveralKeysAndGoesOnToTheNextUntilOneIsDone() {
    PendingWaits.Wait both = waits.add(List.of("q", "k"));
    PendingWaits.Wait queueOnly = waits.add(List.of("q"));
    waits.pushed("q");
    assertThat(both.done()).as("k is still awaited").isFalse();
    assertThat(queueOnly.done()).isTrue();
    waits.pushed("q");
    assertThat(both.done()).as("one push counts once for a wait").isFalse();
    waits.written("k");
    assertThat(both.done()).isTrue();
  }

  @Test
  void aCancelledWaitTakesNoPushAndSaysWhetherItWasDone() {
    PendingWaits.Wait gone = waits.add(List.of("q"));
    PendingWaits.Wait next = waits.add(List.of("q"));
    assertThat(waits.cancel(gone)).isFalse();
    waits.pushed("q");
    assertThat(gone.done()).isFalse();
    assertThat(next.done()).isTrue();
    assertThat(waits.cancel(next)).as("released before the cancel: STOP_WAITING is owed").isTrue();
  }

  @Test
  void aWriteAfterAPushReleasesTheRestAndAWaitForNoKeysIsDoneAtOnce() {
    PendingWaits.Wait a = waits.add(List.of("q"));
    PendingWaits.Wait b = waits.add(List.of("q"));
    waits.pushed("q");
    waits.written("q");
    assertThat(a.done()).isTrue();
    assertThat(b.done()).isTrue();
    assertThat(waits.add(List.of()).done()).isTrue();
  }
}
