package io.nccl4j;

import static io.nccl4j.testing.RankTensors.assertSentinel;
import static io.nccl4j.testing.RankTensors.rankData;
import static io.nccl4j.testing.RankTensors.sentinel;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowable;

import io.nccl4j.testing.TestTime;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import org.assertj.core.api.ThrowableAssert.ThrowingCallable;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * Checks run on the calling rank before anything is enqueued: a rejected call on every rank throws
 * {@link UsageException}, leaves outputs untouched, does not advance the sequence number, and the
 * group stays usable.
 */
@Tag("multirank")
class CheckBeforeEnqueueTest {
  private static final int P = 4;
  private static final Duration TIMEOUT = TestTime.seconds(60);

  private static UsageException rejected(ProcessGroup pg, ThrowingCallable call, String torchMessage) {
    long before = pg.sequenceNumber();
    Throwable t = catchThrowable(call);
    assertThat(t).as("rank %d", pg.rank()).isInstanceOf(UsageException.class);
    assertThat(((UsageException) t).torchMessage()).isEqualTo(torchMessage);
    assertThat(pg.sequenceNumber()).as("sequence number after a rejected call").isEqualTo(before);
    return (UsageException) t;
  }

  /** allReduce(SUM) of rankData must be p·i + 1000·p(p−1)/2. */
  private static void assertGroupUsable(ProcessGroup pg, long expectedSeqBefore) {
    assertThat(pg.sequenceNumber()).isEqualTo(expectedSeqBefore);
    try (Tensor t = rankData(pg, 12, 1000)) {
      Work w = pg.allReduceAsync(t, ReduceOp.SUM);
      assertThat(w.sequenceNumber()).isEqualTo(expectedSeqBefore + 1);
      w.waitFor();
      for (long i = 0; i < 12; i++) {
        assertThat(t.getLong(i)).isEqualTo(P * i + 1000L * P * (P - 1) / 2);
      }
    }
    assertThat(pg.sequenceNumber()).isEqualTo(expectedSeqBefore + 1);
  }

  @Test
  void rejectedCallsOnEveryRankLeaveGroupUsable() {
    AtomicInteger ranksDone = new AtomicInteger();
    LocalCluster.of(P).timeout(TIMEOUT).strictMemory(true).run(pg -> {
      // The chapter's contract: 1003 into 250 is rejected by the capacity check.
      try (Tensor in = rankData(pg, 1003, 1000); Tensor out = sentinel(pg, 250, DType.INT64)) {
        UsageException e = rejected(pg, () -> pg.reduceScatterTensor(out, in, ReduceOp.SUM),
            "input tensor must be the same size as output size times world size");
        assertThat(e.getMessage()).contains("1003").contains("1000");
        rejected(pg, () -> pg.reduceScatterTensorAsync(out, in, ReduceOp.SUM),
            "input tensor must be the same size as output size times world size");
        assertSentinel(out);
      }
      try (Tensor in = rankData(pg, 3, 1000); Tensor out = sentinel(pg, 11, DType.INT64)) {
        rejected(pg, () -> pg.allGatherIntoTensorAsync(out, in),
            "output tensor size must be equal to world_size times input tensor size");
        assertSentinel(out);
      }
      try (Tensor in = rankData(pg, 8, 1000); Tensor out = sentinel(pg, 8, DType.INT32)) {
        rejected(pg, () -> pg.allReduce(out, in, ReduceOp.SUM), "Tensors must have identical type");
        assertSentinel(out);
      }
      try (Tensor t = sentinel(pg, 8, DType.INT64)) {
        rejected(pg, () -> pg.allReduce(t, ReduceOp.BAND), "Cannot use ReduceOp.BAND with NCCL");
        rejected(pg, () -> pg.allReduceAsync(t, ReduceOp.premulSum(2)),
            "PreMulSum Data type must be half, float, bfloat16 or double");
        rejected(pg, () -> pg.broadcast(t, P), "invalid root rank: " + P);
        rejected(pg, () -> pg.reduceAsync(t, -1, ReduceOp.SUM), "invalid root rank: -1");
        assertSentinel(t);
      }
      try (Tensor in = rankData(pg, 7, 1000); Tensor out = sentinel(pg, 7, DType.INT64)) {
        rejected(pg, () -> pg.allToAllSingle(out, in), "Tensor's dim 0 does not divide equally across group size");
        assertSentinel(out);
      }
      try (Tensor t = sentinel(pg, 4, DType.INT64)) {
        rejected(pg, () -> pg.send(t, pg.rank()), "Invalid destination rank: destination rank should not be the"
            + " same as the rank of the current process.");
        rejected(pg, () -> pg.recvAsync(t, P + 1), "Invalid source rank: " + (P + 1));
        assertSentinel(t);
      }
      assertThat(pg.allocator().allocatedBytes()).isZero();
      assertGroupUsable(pg, 0);
      assertGroupUsable(pg, 1);
      ranksDone.incrementAndGet();
    });
    assertThat(ranksDone.get()).isEqualTo(P);
  }

  @Test
  void rejectedCallAfterSuccessfulOnesDoesNotShiftSequence() {
    List<Long> seqs = LocalCluster.of(P).timeout(TIMEOUT).strictMemory(true).call(pg -> {
      try (Tensor a = rankData(pg, 8, 1000); Tensor shard = pg.empty(2, DType.INT64)) {
        pg.allReduce(a, ReduceOp.MAX);
        for (long i = 0; i < 8; i++) {
          assertThat(a.getLong(i)).isEqualTo(1000L * (P - 1) + i);
        }
        try (Tensor wrongShard = sentinel(pg, 3, DType.INT64)) {
          rejected(pg, () -> pg.reduceScatterTensor(wrongShard, a, ReduceOp.SUM),
              "input tensor must be the same size as output size times world size");
          assertSentinel(wrongShard);
        }
        // The rejected call must not have consumed sequence number 2 on this rank.
        Work w = pg.reduceScatterTensorAsync(shard, a, ReduceOp.SUM);
        assertThat(w.sequenceNumber()).isEqualTo(2);
        w.waitFor();
        int r = pg.rank();
        for (long j = 0; j < 2; j++) {
          assertThat(shard.getLong(j)).isEqualTo(P * (1000L * (P - 1) + 2L * r + j));
        }
      }
      return pg.sequenceNumber();
    });
    assertThat(seqs).containsExactly(2L, 2L, 2L, 2L);
  }

  @Test
  void closedTensorIsRejectedBeforeEnqueueAndGroupStaysUsable() {
    LocalCluster.of(P).timeout(TIMEOUT).strictMemory(true).run(pg -> {
      Tensor closed = rankData(pg, 8, 1000);
      closed.close();
      try (Tensor out = sentinel(pg, 8, DType.INT64)) {
        Throwable t = catchThrowable(() -> pg.allReduceAsync(out, closed, ReduceOp.SUM));
        assertThat(t).isInstanceOf(IllegalStateException.class).isNotInstanceOf(UsageException.class)
            .hasMessageContaining("is closed");
        assertThat(catchThrowable(() -> pg.broadcast(closed, 0))).isInstanceOf(IllegalStateException.class);
        assertThat(pg.sequenceNumber()).isZero();
        assertSentinel(out);
      }
      assertGroupUsable(pg, 0);
    });
  }

  @Test
  void closedGroupRejectsCallsLocally() {
    List<String> messages = LocalCluster.of(2).timeout(TIMEOUT).strictMemory(true).call(pg -> {
      try (Tensor t = rankData(pg, 4, 1000)) {
        pg.allReduce(t, ReduceOp.SUM);
        for (long i = 0; i < 4; i++) {
          assertThat(t.getLong(i)).isEqualTo(2 * i + 1000);
        }
        pg.close();
        assertThat(pg.isClosed()).isTrue();
        pg.close(); // idempotent
        Throwable e = catchThrowable(() -> pg.allReduceAsync(t, ReduceOp.SUM));
        assertThat(e).isInstanceOf(IllegalStateException.class);
        assertThat(catchThrowable(pg::barrier)).isInstanceOf(IllegalStateException.class);
        assertThat(pg.sequenceNumber()).isEqualTo(1);
        return e.getMessage();
      }
    });
    assertThat(messages).containsExactly("ProcessGroup(rank 0 of 2, cpu, cpu, closed) is closed",
        "ProcessGroup(rank 1 of 2, cpu, cpu, closed) is closed");
  }
}
