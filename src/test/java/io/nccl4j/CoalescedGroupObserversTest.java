package io.nccl4j;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowable;

import io.nccl4j.cpu.CpuBackend;
import io.nccl4j.internal.transport.threads.LocalFabric;
import io.nccl4j.memory.Allocator;
import io.nccl4j.spi.Backend;
import io.nccl4j.spi.Collective;
import io.nccl4j.trace.FlightRecorder;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * A coalesced group keeps the observers' contract a single operation keeps: its members are reported enqueued
 * before the backend sees the group, and a group the backend refuses stays in the flight recorder, each member
 * failed with the backend's error — as PyTorch's flight recorder keeps the launches that failed.
 */
@Tag("unit")
class CoalescedGroupObserversTest {
  /** A one-rank CPU backend whose groups are refused, noting what the flight recorder held when it was asked. */
  private static final class RefusingBackend implements Backend {
    final CpuBackend b;
    final List<String> seenAtSubmit = new ArrayList<>();
    ProcessGroup pg;
    final boolean refuse;

    RefusingBackend(Allocator alloc, boolean refuse) {
      this.b = new CpuBackend(new LocalFabric(1).endpoint(0), alloc, Duration.ofSeconds(30));
      this.refuse = refuse;
    }

    @Override public Identity identity() { return b.identity(); }
    @Override public void submit(Collective c, boolean w, Completion done) { b.submit(c, w, done); }
    @Override public void abort(BackendException cause) { b.abort(cause); }
    @Override public void close() { b.close(); }

    @Override
    public void submitGroup(List<Collective> ops, Completion done) {
      for (FlightRecorder.Entry e : pg.flightRecorder().entries()) {
        seenAtSubmit.add(e.op + " #" + e.seq + " " + e.state);
      }
      if (refuse) {
        throw new IllegalStateException("the backend refuses this group of " + ops.size());
      }
      b.submitGroup(ops, done);
    }
  }

  private static List<String> entries(ProcessGroup pg) {
    List<String> out = new ArrayList<>();
    for (FlightRecorder.Entry e : pg.flightRecorder().entries()) {
      out.add(e.op + " #" + e.seq + " " + e.state + (e.error == null ? "" : ": " + e.error));
    }
    return out;
  }

  @Test
  void aRefusedGroupStaysInTheFlightRecorderEachMemberFailedWithTheBackendsError() {
    try (Allocator alloc = Allocator.host().child("refused-group")) {
      RefusingBackend backend = new RefusingBackend(alloc, true);
      ProcessGroup pg = ProcessGroup.create(backend);
      backend.pg = pg;
      try (Tensor a = Tensor.ofLongs(1, 2, 3).copy(pg.allocator()); Tensor b = Tensor.ofLongs(4, 5).copy(pg.allocator())) {
        ProcessGroup.Coalesced g = pg.coalesce();
        Work wa = pg.allReduceAsync(a, ReduceOp.SUM);
        Work wb = pg.allReduceAsync(b, ReduceOp.MAX);
        Throwable refused = catchThrowable(g::close);
        assertThat(refused).hasMessage("the backend refuses this group of 2");
        assertThat(backend.seenAtSubmit).as("the flight recorder when the backend got the group")
            .containsExactly("ALLREDUCE #1 scheduled", "ALLREDUCE #2 scheduled");
        assertThat(entries(pg)).containsExactly("ALLREDUCE #1 failed: the backend refuses this"
            + " group of 2", "ALLREDUCE #2 failed: the backend refuses this group of 2");
        assertThat(wa.exception()).get().asString().contains("the backend refuses this group of 2");
        assertThat(wb.isCompleted()).isTrue();
        assertThat(wb.isSuccess()).isFalse();
      } finally {
        pg.close();
      }
    }
  }

  @Test
  void anAcceptedGroupIsEnqueuedBeforeTheBackendSeesItAndCompletesInTheRecorder() {
    try (Allocator alloc = Allocator.host().child("accepted-group")) {
      RefusingBackend backend = new RefusingBackend(alloc, false);
      ProcessGroup pg = ProcessGroup.create(backend);
      backend.pg = pg;
      try (Tensor a = Tensor.ofLongs(1, 2, 3).copy(pg.allocator())) {
        ProcessGroup.Coalesced g = pg.coalesce();
        pg.allReduceAsync(a, ReduceOp.SUM);
        g.close();
        g.work().waitFor();
        assertThat(backend.seenAtSubmit).containsExactly("ALLREDUCE #1 scheduled");
        assertThat(entries(pg)).containsExactly("ALLREDUCE #1 completed");
        assertThat(a.toLongArray()).containsExactly(1, 2, 3);
      } finally {
        pg.close();
      }
    }
  }
}
