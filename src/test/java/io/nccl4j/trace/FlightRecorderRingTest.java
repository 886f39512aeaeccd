package io.nccl4j.trace;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

import io.nccl4j.BackendException;
import io.nccl4j.DType;
import io.nccl4j.Device;
import io.nccl4j.OpType;
import io.nccl4j.ReduceOp;
import io.nccl4j.spi.Collective;
import java.util.List;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * The flight recorder's ring on its own: states and times per entry, completions out of order,
 * more operations in flight than the ring holds, and a completion for an entry already overwritten.
 */
@Tag("unit")
class FlightRecorderRingTest {
  private static final long T0 = System.nanoTime();

  private static Collective op(long seq, long count) {
    Collective.Buffer b = new Collective.Buffer(0x1000 * seq, count, DType.FLOAT32, Device.cpu());
    return Collective.Call.allReduce(seq, b, b, ReduceOp.SUM);
  }

  private static List<String> states(FlightRecorder r) {
    return r.entries().stream().map(e -> e.seq + ":" + e.state).toList();
  }

  @Test
  void statesAndTimesFollowEachOperation() {
    FlightRecorder r = new FlightRecorder(4);
    Collective a = op(1, 10);
    Collective b = op(2, 20);
    r.enqueued(0, a, "", T0);
    r.enqueued(0, b, "", T0 + 1_000);
    r.started(0, a, T0 + 2_000);
    assertThat(states(r)).containsExactly("1:started", "2:scheduled");

    r.completed(0, a, null, null, T0 + 5_000);
    r.completed(0, b, null, new BackendException("boom"), T0 + 9_000);

    List<FlightRecorder.Entry> es = r.entries();
    assertThat(states(r)).containsExactly("1:completed", "2:failed");
    assertThat(es.get(0).numelIn).isEqualTo(10);
    assertThat(es.get(1).numelOut).isEqualTo(20);
    // Microseconds: each time is rounded on its own, so a difference may be off by one.
    assertThat(es.get(0).startedMicros - es.get(0).enqueuedMicros).isCloseTo(2, within(1L));
    assertThat(es.get(0).completedMicros - es.get(0).enqueuedMicros).isCloseTo(5, within(1L));
    assertThat(es.get(1).startedMicros).as("never reported started").isZero();
    assertThat(es.get(1).completedMicros - es.get(0).enqueuedMicros).isCloseTo(9, within(1L));
    assertThat(es.get(0).error).isNull();
    assertThat(es.get(1).error).isEqualTo("boom");
  }

  @Test
  void completionsOutOfOrderFindTheirOwnEntries() {
    FlightRecorder r = new FlightRecorder(8);
    Collective[] ops = new Collective[5];
    for (int i = 0; i < 5; i++) {
      ops[i] = op(i + 1, i + 1);
      r.enqueued(0, ops[i], "", T0 + i);
    }
    r.completed(0, ops[3], null, null, T0 + 100);
    r.completed(0, ops[1], null, null, T0 + 100);
    assertThat(states(r)).containsExactly("1:scheduled", "2:completed", "3:scheduled", "4:completed",
        "5:scheduled");
    r.completed(0, ops[0], null, null, T0 + 100);
    r.completed(0, ops[2], null, null, T0 + 100);
    // Reported twice: the second report changes nothing.
    r.completed(0, ops[2], null, new BackendException("late"), T0 + 200);
    assertThat(states(r)).containsExactly("1:completed", "2:completed", "3:completed", "4:completed",
        "5:scheduled");
    r.completed(0, ops[4], null, null, T0 + 100);
    assertThat(states(r)).containsOnly("1:completed", "2:completed", "3:completed", "4:completed",
        "5:completed");
  }

  @Test
  void moreInFlightThanTheRingHoldsKeepsTheNewest() {
    FlightRecorder r = new FlightRecorder(3);
    Collective[] ops = new Collective[7];
    for (int i = 0; i < 7; i++) {
      ops[i] = op(i + 1, i + 1);
      r.enqueued(0, ops[i], "", T0 + i);
    }
    assertThat(states(r)).containsExactly("5:scheduled", "6:scheduled", "7:scheduled");

    // The newest first, while the oldest recorded operation (1) is gone: 7 shares its slot.
    r.completed(0, ops[6], null, null, T0 + 100);
    assertThat(states(r)).containsExactly("5:scheduled", "6:scheduled", "7:completed");
    // The first four were overwritten: their completions find nothing and change nothing.
    for (int i = 0; i < 4; i++) {
      r.completed(0, ops[i], null, null, T0 + 100);
    }
    assertThat(states(r)).containsExactly("5:scheduled", "6:scheduled", "7:completed");
    r.completed(0, ops[4], null, null, T0 + 100);
    assertThat(states(r)).containsExactly("5:completed", "6:scheduled", "7:completed");

    // Ring reused afterwards: the new entries start scheduled, not with the old states.
    r.completed(0, ops[5], null, null, T0 + 100);
    Collective next = op(8, 8);
    r.enqueued(0, next, "", T0 + 200);
    assertThat(states(r)).containsExactly("6:completed", "7:completed", "8:scheduled");
    r.completed(0, next, null, null, T0 + 300);
    assertThat(states(r)).containsExactly("6:completed", "7:completed", "8:completed");
  }
}
