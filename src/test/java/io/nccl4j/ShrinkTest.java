package io.nccl4j;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.nccl4j.internal.transport.tcp.TcpThreadsCluster;
import io.nccl4j.testing.TestTime;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Shrink and continue on the CPU backend: a rank's group closes under the others (as a crashed
 * process's sockets do), the survivors are told which rank, shrink to themselves and get exact results.
 */
@Tag("multirank")
class ShrinkTest {
  private static LocalCluster cluster(String transport, int worldSize) {
    LocalCluster c = LocalCluster.of(worldSize).timeout(TestTime.seconds(60));
    return transport.equals("tcp") ? c.backend(new TcpThreadsCluster()) : c;
  }

  private static Tensor data(ProcessGroup pg, int worldRank, int n) {
    Tensor t = pg.empty(n, DType.INT64);
    for (int i = 0; i < n; i++) {
      t.setLong(i, 1000L * (worldRank + 1) + i);
    }
    return t;
  }

  @ParameterizedTest
  @ValueSource(strings = {"threads", "tcp"})
  void survivorsOfRankTwoOfFourShrinkReRankAndSumExactly(String transport) {
    List<long[]> out = cluster(transport, 4).call(world -> {
      try (Tensor t = data(world, world.rank(), 3)) {
        world.allReduce(t, ReduceOp.SUM);
      }
      if (world.rank() == 2) {
        world.close();
        return null;
      }
      try (Tensor t = data(world, world.rank(), 3)) {
        PeerFailureException e = (PeerFailureException) org.assertj.core.api.Assertions.catchThrowable(
            () -> world.allReduce(t, ReduceOp.SUM));
        assertThat(e).as("rank %d", world.rank()).isNotNull();
        assertThat(e.failedRank()).isEqualTo(2);
      }
      try (ProcessGroup s = world.shrink(2); Tensor t = data(world, world.rank(), 3)) {
        assertThat(s.size()).isEqualTo(3);
        assertThat(s.ranks()).containsExactly(0, 1, 3);
        s.allReduce(t, ReduceOp.SUM);
        long[] r = new long[5];
        for (int i = 0; i < 3; i++) {
          r[i] = t.getLong(i);
        }
        r[3] = s.rank();
        r[4] = s.groupName().equals("0.1") ? 1 : 0;
        return r;
      } finally {
        world.close();
      }
    });
    // world ranks 0, 1, 3: 1000 + 2000 + 4000 = 7000, plus 3i
    assertThat(out.get(0)).containsExactly(7000, 7003, 7006, 0, 1);
    assertThat(out.get(1)).containsExactly(7000, 7003, 7006, 1, 1);
    assertThat(out.get(2)).isNull();
    assertThat(out.get(3)).containsExactly(7000, 7003, 7006, 2, 1);
  }

  @ParameterizedTest
  @ValueSource(strings = {"threads", "tcp"})
  void aRankCannotExcludeItselfNorNobody(String transport) {
    cluster(transport, 2).run(world -> {
      assertThatThrownBy(() -> world.shrink(world.rank())).isInstanceOf(UsageException.class)
          .hasMessage("shrink_group: a rank cannot exclude itself (rank " + world.rank() + " is in ["
              + world.rank() + "])");
      assertThatThrownBy(() -> world.shrink()).isInstanceOf(UsageException.class)
          .hasMessageStartingWith("new_group: the ranks of the new group must not be empty");
      world.barrier();
    });
  }
}
