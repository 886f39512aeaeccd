package io.nccl4j.trace;

import static org.assertj.core.api.Assertions.assertThat;

import io.nccl4j.DType;
import io.nccl4j.Device;
import io.nccl4j.OpType;
import io.nccl4j.ReduceOp;
import io.nccl4j.spi.Collective;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/** {@link LaunchRecorder}, {@link Range} and {@link ChromeTrace} without any group. */
@Tag("unit")
class LaunchRecorderTest {
  private static Collective coll(OpType op, long seq, long in, long out) {
    return Collective.Call.of(op, seq, new Collective.Buffer(0x1000, in, DType.FLOAT32, Device.cpu()),
        new Collective.Buffer(0x9000, out, DType.FLOAT32, Device.cpu()), ReduceOp.SUM);
  }

  private static void launch(LaunchRecorder rec, int rank, Collective c, String range, long t0, long t1) {
    rec.enqueued(rank, c, range, t0);
    rec.completed(rank, c, null, null, t1);
  }

  @Test
  void countsInRangeIncludeNestedRangesAndExcludeOthers() {
    LaunchRecorder rec = new LaunchRecorder();
    launch(rec, 0, coll(OpType.ALLREDUCE, 0, 8, 8), "", 1, 2);                       // warm-up, no range
    launch(rec, 0, coll(OpType.ALLREDUCE, 1, 8, 8), "direct", 3, 4);
    launch(rec, 1, coll(OpType.ALLREDUCE, 1, 8, 8), "direct", 3, 5);
    launch(rec, 0, coll(OpType.ALLREDUCE, 2, 8, 8), "direct/inner", 6, 7);          // nested: counts
    launch(rec, 0, coll(OpType.REDUCE_SCATTER, 3, 8, 2), "decomposed", 8, 9);
    launch(rec, 0, coll(OpType.ALLGATHER, 4, 2, 8), "decomposed", 10, 11);
    launch(rec, 0, coll(OpType.ALLREDUCE, 5, 8, 8), "directly", 12, 13);            // a different range
    launch(rec, 0, coll(OpType.ALLREDUCE, 6, 8, 8), "outer/direct", 14, 15);        // not under "direct"
    launch(rec, 0, coll(OpType.BROADCAST, 7, 8, 8), "decomposed/x/y", 16, 17);

    assertThat(rec.countsInRange("direct")).isEqualTo(Map.of("ALLREDUCE", 3));
    assertThat(rec.countsInRange("decomposed")).isEqualTo(Map.of("_REDUCE_SCATTER_BASE", 1, "_ALLGATHER_BASE", 1,
        "BROADCAST", 1));
    assertThat(rec.countsInRange("direct/inner")).isEqualTo(Map.of("ALLREDUCE", 1));
    assertThat(rec.countsInRange("outer")).isEqualTo(Map.of("ALLREDUCE", 1));
    assertThat(rec.countsInRange("nothing")).isEmpty();
    assertThat(rec.launches()).hasSize(9);
  }

  @Test
  void launchesCarryTheirDetailsInEnqueueOrder() {
    LaunchRecorder rec = new LaunchRecorder();
    Collective late = coll(OpType.ALLGATHER, 9, 2, 8);
    Collective early = coll(OpType.REDUCE_SCATTER, 8, 8, 2);
    rec.enqueued(0, early, "decomposed", 100);
    rec.enqueued(0, late, "decomposed", 200);
    rec.completed(0, late, null, new RuntimeException("boom"), 250);   // completes first, failed
    rec.completed(0, early, null, null, 300);
    List<LaunchRecorder.Launch> l = rec.launches();
    assertThat(l).containsExactly(
        new LaunchRecorder.Launch(0, "_REDUCE_SCATTER_BASE", 8, 8, 2, "float32", "decomposed", 100, 300, true),
        new LaunchRecorder.Launch(0, "_ALLGATHER_BASE", 9, 2, 8, "float32", "decomposed", 200, 250, false));
  }

  @Test
  void uncompletedLaunchesAreNotCountedAndUnknownCompletionsIgnored() {
    LaunchRecorder rec = new LaunchRecorder();
    rec.enqueued(0, coll(OpType.ALLREDUCE, 1, 4, 4), "direct", 1);
    rec.completed(1, coll(OpType.ALLREDUCE, 1, 4, 4), null, null, 2);   // other rank: never enqueued
    rec.completed(0, coll(OpType.ALLREDUCE, 2, 4, 4), null, null, 2);   // other seq
    assertThat(rec.launches()).isEmpty();
    assertThat(rec.countsInRange("direct")).isEmpty();
    rec.completed(0, coll(OpType.ALLREDUCE, 1, 4, 4), null, null, 3);
    assertThat(rec.countsInRange("direct")).isEqualTo(Map.of("ALLREDUCE", 1));
    rec.clear();
    assertThat(rec.launches()).isEmpty();
    assertThat(rec.countsInRange("direct")).isEmpty();
  }

  @Test
  void sameSeqOnDifferentRanksAndOpsAreDistinct() {
    LaunchRecorder rec = new LaunchRecorder();
    for (int rank = 0; rank < 4; rank++) {
      rec.enqueued(rank, coll(OpType.ALLREDUCE, 5, 4, 4), "direct", rank);
      rec.enqueued(rank, coll(OpType.SEND, 5, 4, 4), "direct", rank);
    }
    for (int rank = 3; rank >= 0; rank--) {
      rec.completed(rank, coll(OpType.SEND, 5, 4, 4), null, null, 10);
      rec.completed(rank, coll(OpType.ALLREDUCE, 5, 4, 4), null, null, 10);
    }
    assertThat(rec.countsInRange("direct")).isEqualTo(Map.of("ALLREDUCE", 4, "SEND", 4));
  }

  // ------------------------------------------------------------------ Range

  @Test
  void rangesNestPerThreadAndNotifyListeners() throws Exception {
    List<String> seen = new ArrayList<>();
    Range.Listener l = new Range.Listener() {
      @Override
      public void pushed(String name) {
        seen.add("push " + name);
      }

      @Override
      public void popped(String name) {
        seen.add("pop " + name);
      }
    };
    Range.addListener(l);
    try {
      assertThat(Range.currentPath()).isEmpty();
      assertThat(Range.current()).isNull();
      try (Range a = Range.push("direct")) {
        assertThat(a.name()).isEqualTo("direct");
        try (Range b = Range.push("inner")) {
          assertThat(Range.currentPath()).isEqualTo("direct/inner");
          assertThat(Range.current()).isEqualTo("inner");
          Thread other = new Thread(() -> {
            // ranges are per thread
            synchronized (seen) {
              seen.add("other sees '" + Range.currentPath() + "'");
            }
          });
          other.start();
          other.join();
          b.close();
          b.close(); // idempotent: popped once
        }
        assertThat(Range.currentPath()).isEqualTo("direct");
      }
      assertThat(Range.currentPath()).isEmpty();
    } finally {
      Range.removeListener(l);
    }
    assertThat(seen).containsExactly("push direct", "push inner", "other sees ''", "pop inner", "pop direct");
    try (Range r = Range.push("after")) {
      assertThat(Range.currentPath()).isEqualTo("after");
    }
    assertThat(seen).hasSize(5);
  }

  // ------------------------------------------------------------------ ChromeTrace

  @Test
  void chromeTraceShiftsTimesAndNamesOneTrackPerRank() {
    List<ChromeTrace.Event> events = List.of(
        new ChromeTrace.Event(1, "direct", "range", 5_000, 9_500, Map.of()),
        new ChromeTrace.Event(0, "direct", "range", 2_000, 8_000, null),
        new ChromeTrace.Event(0, "ALLREDUCE", "collective", 3_000, 2_500, Map.of("seq", 1)));
    Map<String, Object> doc = ChromeTrace.build(events);
    @SuppressWarnings("unchecked")
    List<Map<String, Object>> out = (List<Map<String, Object>>) doc.get("traceEvents");
    assertThat(out).hasSize(5);
    assertThat(out.get(0)).containsEntry("name", "direct").containsEntry("ph", "X").containsEntry("tid", 1)
        .containsEntry("pid", 0).containsEntry("ts", 3.0).containsEntry("dur", 4.5).doesNotContainKey("args");
    assertThat(out.get(1)).containsEntry("ts", 0.0).containsEntry("dur", 6.0);
    assertThat(out.get(2)).containsEntry("ts", 1.0).containsEntry("dur", 0.0).containsEntry("args", Map.of("seq", 1));
    assertThat(out.get(3)).containsEntry("name", "thread_name").containsEntry("ph", "M").containsEntry("tid", 0)
        .containsEntry("args", Map.of("name", "rank 0"));
    assertThat(out.get(4)).containsEntry("tid", 1).containsEntry("args", Map.of("name", "rank 1"));
    assertThat(ChromeTrace.build(List.of()).get("traceEvents")).isEqualTo(List.of());
  }

  @Test
  void launchesBecomeCollectiveEvents() {
    List<ChromeTrace.Event> ev = ChromeTrace.launches(List.of(
        new LaunchRecorder.Launch(2, "ALLREDUCE", 7, 16, 16, "float32", "direct", 10, 20, true)));
    assertThat(ev).hasSize(1);
    ChromeTrace.Event e = ev.get(0);
    assertThat(e.rank()).isEqualTo(2);
    assertThat(e.name()).isEqualTo("ALLREDUCE");
    assertThat(e.category()).isEqualTo("collective");
    assertThat(e.startNanos()).isEqualTo(10);
    assertThat(e.endNanos()).isEqualTo(20);
    assertThat(e.args()).containsExactly(Map.entry("seq", 7L), Map.entry("numelIn", 16L), Map.entry("numelOut", 16L),
        Map.entry("dtype", "float32"), Map.entry("range", "direct"), Map.entry("ok", true));
  }
}
