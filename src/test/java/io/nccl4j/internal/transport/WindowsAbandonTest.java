package io.nccl4j.internal.transport;

import static org.assertj.core.api.Assertions.assertThat;

import io.nccl4j.OpType;
import io.nccl4j.PeerFailureException;
import io.nccl4j.internal.transport.threads.LocalFabric;
import io.nccl4j.memory.NativeMemory;
import io.nccl4j.testing.TestTime;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.assertj.core.api.Assertions;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * The threads' windows ({@link LocalFabric}) keep the same promise as the processes' (tested in
 * {@code ProcessWindowsTest}): a rank that abandons a window makes a peer leaving it fail with the
 * cause that rank records, rather than return as if its part were done.
 */
@Tag("multirank")
class WindowsAbandonTest {
  @Test
  void aPeerLeavingAWindowAnotherAbandonedFailsWithThatRanksCause() throws Exception {
    LocalFabric fabric = new LocalFabric(2);
    TransferTag tag = new TransferTag(TransferTag.Channel.COLLECTIVE, OpType.ALLREDUCE, 1);
    long buf = NativeMemory.allocate(64);
    ExecutorService pool = Executors.newFixedThreadPool(2);
    try {
      List<Future<Throwable>> left = new ArrayList<>();
      for (int rank = 0; rank < 2; rank++) {
        int r = rank;
        left.add(pool.submit(() -> {
          Transport t = fabric.endpoint(r);
          SharedMemory.Window w = t.sharedMemory().open(tag, "test", 64, System.nanoTime() + 60_000_000_000L, buf);
          if (r == 1) {
            w.abandon();
            w.close(); // a no-op after abandon
            t.fail(1, new IllegalStateException("rank 1's exchange with another host broke"));
            return null;
          }
          return Assertions.catchThrowable(w::close);
        }));
      }
      // A bound, so that a broken abandon fails here instead of hanging the build.
      assertThat(left.get(1).get(TestTime.scaledSeconds(30), TimeUnit.SECONDS)).isNull();
      Throwable seen = left.get(0).get(TestTime.scaledSeconds(30), TimeUnit.SECONDS);
      assertThat(seen).isInstanceOf(PeerFailureException.class)
          .hasMessageContaining("rank 1's exchange with another host broke");
      assertThat(((PeerFailureException) seen).failedRank()).isEqualTo(1);
    } finally {
      pool.shutdownNow();
      NativeMemory.free(buf);
    }
  }
}
