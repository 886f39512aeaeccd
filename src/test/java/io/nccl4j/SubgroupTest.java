package io.nccl4j;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.catchThrowable;

import io.nccl4j.internal.transport.tcp.TcpThreadsCluster;
import io.nccl4j.testing.TestTime;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.Optional;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** newGroup, split, nested groups and the rank maps, on threads sharing memory and over TCP. */
@Tag("multirank")
class SubgroupTest {
  private static LocalCluster cluster(String transport, int worldSize) {
    LocalCluster c = LocalCluster.of(worldSize).timeout(TestTime.seconds(60)).strictMemory(true);
    return transport.equals("tcp") ? c.backend(new TcpThreadsCluster()) : c;
  }

  /** Rank r of the world contributes 1000·(r+1) + i at element i: every element distinct and known. */
  private static Tensor one(ProcessGroup pg, DType dtype, long value) {
    Tensor t = pg.empty(1, dtype);
    t.setLong(0, value);
    return t;
  }

  private static Tensor worldData(ProcessGroup world, int n) {
    Tensor t = world.empty(n, DType.FLOAT32);
    for (int i = 0; i < n; i++) {
      t.setDouble(i, 1000.0 * (world.globalRank() + 1) + i);
    }
    return t;
  }

  @ParameterizedTest
  @ValueSource(strings = {"threads", "tcp"})
  void aNewGroupOfRanksOneAndThreeOfFourSumsOnlyItsMembers(String transport) {
    List<float[]> out = cluster(transport, 4).call(world -> {
      Optional<ProcessGroup> g = world.newGroup(3, 1);
      if (world.rank() == 0 || world.rank() == 2) {
        assertThat(g).isEmpty();
        return null;
      }
      try (ProcessGroup sub = g.orElseThrow(); Tensor t = worldData(world, 5)) {
        assertThat(sub.size()).isEqualTo(2);
        assertThat(sub.rank()).isEqualTo(world.rank() == 1 ? 0 : 1);
        assertThat(sub.ranks()).containsExactly(1, 3);
        assertThat(sub.globalRank()).isEqualTo(world.rank());
        assertThat(sub.groupRank(3)).isEqualTo(1);
        assertThat(sub.groupName()).isEqualTo("0.1");
        sub.allReduce(t, ReduceOp.SUM);
        return t.toFloatArray();
      }
    });
    // ranks 1 and 3: 2000 + i and 4000 + i
    float[] expected = {6000, 6002, 6004, 6006, 6008};
    assertThat(out.get(1)).containsExactly(expected);
    assertThat(out.get(3)).containsExactly(expected);
  }

  @ParameterizedTest
  @ValueSource(strings = {"threads", "tcp"})
  void splitByParityGivesTwoGroupsOrderedByKey(String transport) {
    List<long[]> out = cluster(transport, 5).call(world -> {
      // colour: parity; key: reversed rank, so the highest rank of each colour is rank 0 there
      try (ProcessGroup g = world.split(world.rank() % 2, -world.rank()).orElseThrow();
          Tensor t = one(world, DType.INT32, world.rank() * 10 + 1);
          Tensor all = g.zeros(g.size(), DType.INT32)) {
        g.allGatherIntoTensor(all, t);
        long[] gathered = all.toLongArray();
        long[] r = Arrays.copyOf(gathered, gathered.length + 2);
        r[gathered.length] = g.rank();
        r[gathered.length + 1] = g.globalRank(0);
        return r;
      }
    });
    // even: ranks 4, 2, 0 in that order; odd: ranks 3, 1
    assertThat(out.get(0)).containsExactly(41, 21, 1, 2, 4);
    assertThat(out.get(2)).containsExactly(41, 21, 1, 1, 4);
    assertThat(out.get(4)).containsExactly(41, 21, 1, 0, 4);
    assertThat(out.get(1)).containsExactly(31, 11, 1, 3);
    assertThat(out.get(3)).containsExactly(31, 11, 0, 3);
  }

  @ParameterizedTest
  @ValueSource(strings = {"threads", "tcp"})
  void aGroupMadeFromASubgroupMapsItsRanksToTheWorld(String transport) {
    List<long[]> out = cluster(transport, 6).call(world -> {
      Optional<ProcessGroup> evens = world.newGroup(0, 2, 4);
      if (evens.isEmpty()) {
        return null;
      }
      try (ProcessGroup e = evens.get()) {
        Optional<ProcessGroup> inner = e.newGroup(1, 2); // world ranks 2 and 4
        if (inner.isEmpty()) {
          assertThat(world.rank()).isZero();
          return null;
        }
        try (ProcessGroup g = inner.get(); Tensor t = one(world, DType.INT64, world.rank() * 100L + 7)) {
          assertThat(g.groupName()).isEqualTo("0.1.1");
          assertThat(g.ranks()).containsExactly(2, 4);
          g.broadcast(t, 1);
          return new long[] {t.getLong(0), g.rank(), g.globalRank()};
        }
      }
    });
    assertThat(out.get(2)).containsExactly(407, 0, 2);
    assertThat(out.get(4)).containsExactly(407, 1, 4);
  }

  @ParameterizedTest
  @ValueSource(strings = {"threads", "tcp"})
  void theParentStaysUsableAndBothGroupsInterleave(String transport) {
    List<float[]> out = cluster(transport, 3).call(world -> {
      try (ProcessGroup g = world.newGroup(0, 1, 2).orElseThrow(); Tensor a = worldData(world, 3);
          Tensor b = worldData(world, 3)) {
        Work w1 = world.allReduceAsync(a, ReduceOp.SUM);
        Work w2 = g.allReduceAsync(b, ReduceOp.MAX);
        w2.waitFor();
        w1.waitFor();
        float[] r = Arrays.copyOf(a.toFloatArray(), 6);
        System.arraycopy(b.toFloatArray(), 0, r, 3, 3);
        return r;
      }
    });
    for (float[] r : out) {
      assertThat(r).containsExactly(6000, 6003, 6006, 3000, 3001, 3002);
    }
  }

  @ParameterizedTest
  @ValueSource(strings = {"threads", "tcp"})
  void ranksPassingDifferentListsAllFailNamingThemAndTheGroupStaysUsable(String transport) {
    List<Throwable> seen = cluster(transport, 3).call(world -> {
      Throwable e = catchThrowable(() -> world.newGroup(world.rank() == 2 ? new int[] {0, 2} : new int[] {0, 1}));
      world.barrier(); // a UsageException leaves the group usable
      return e;
    });
    for (int r = 0; r < 3; r++) {
      assertThat(seen.get(r)).as("rank %d", r).isInstanceOf(UsageException.class)
          .hasMessage("new_group: every rank of the group must pass the same ranks, but rank 0 passed"
              + " [0, 1], rank 2 passed [0, 2] (rank " + r + " of group 0)");
    }
  }

  @ParameterizedTest
  @ValueSource(strings = {"threads", "tcp"})
  void aFailureInASubgroupLeavesTheParentWorking(String transport) {
    List<Float> out = cluster(transport, 3).call(world -> {
      Optional<ProcessGroup> g = world.newGroup(0, 1);
      if (g.isPresent()) {
        try (ProcessGroup sub = g.get(); Tensor t = worldData(world, 2); Tensor wrong = Tensor.zeros(3,
            DType.FLOAT32, world.allocator())) {
          // the members disagree on the count: both fail with the mismatch, the world does not
          Tensor mine = sub.rank() == 0 ? t : wrong;
          assertThatThrownBy(() -> sub.allReduce(mine, ReduceOp.SUM)).isInstanceOf(BackendException.class);
        }
      }
      try (Tensor t = worldData(world, 1)) {
        world.allReduce(t, ReduceOp.SUM);
        return t.toFloatArray()[0];
      }
    });
    assertThat(out).containsExactly(6000f, 6000f, 6000f);
  }

  @ParameterizedTest
  @ValueSource(strings = {"threads", "tcp"})
  void badRanksAreRefusedWithPyTorchsMessages(String transport) {
    cluster(transport, 2).run(world -> {
      assertThatThrownBy(() -> world.newGroup(0, 2)).isInstanceOf(UsageException.class)
          .hasMessage("Rank 2 is out of range. Valid ranks are 0 to 1 (world_size=2)");
      assertThatThrownBy(() -> world.newGroup(1, 1)).isInstanceOf(UsageException.class)
          .hasMessage("ranks list must not contain duplicate entries, got [1, 1] (rank 1 is listed more than once)");
      assertThatThrownBy(() -> world.split(-2, 0)).isInstanceOf(UsageException.class)
          .hasMessage("split: the colour must be non-negative, or NO_COLOR (-1) to join no group (got -2)");
      assertThatThrownBy(() -> world.groupRank(5)).isInstanceOf(IllegalArgumentException.class)
          .hasMessage("Global rank 5 is not part of group 0 (world ranks [0, 1])");
      assertThatThrownBy(() -> world.globalRank(2)).isInstanceOf(IllegalArgumentException.class)
          .hasMessage("Group rank 2 is not part of group 0 (ranks 0..1)");
      // nothing was enqueued by the refused calls: the group still works
      assertThat(world.sequenceNumber()).isZero();
      world.barrier();
    });
  }

  @ParameterizedTest
  @ValueSource(strings = {"threads", "tcp"})
  void noColorJoinsNothing(String transport) {
    List<Integer> out = cluster(transport, 3).call(world -> {
      Optional<ProcessGroup> g = world.split(world.rank() == 1 ? ProcessGroup.NO_COLOR : 7, world.rank());
      if (g.isEmpty()) {
        return -1;
      }
      try (ProcessGroup sub = g.get()) {
        assertThat(sub.groupName()).isEqualTo("0.1:7");
        return sub.size() * 10 + sub.rank();
      }
    });
    assertThat(out).containsExactly(20, -1, 21);
  }

  @ParameterizedTest
  @ValueSource(strings = {"threads", "tcp"})
  void aSubgroupsFlightRecorderIsWrittenBesideTheWorlds(String transport, @TempDir Path dir) {
    cluster(transport, 2).run(world -> {
      try (ProcessGroup g = world.newGroup(0, 1).orElseThrow(); Tensor t = worldData(world, 2)) {
        g.allReduce(t, ReduceOp.SUM);
        g.dumpFlightRecorder(dir, "test");
        world.dumpFlightRecorder(dir, "test");
      }
    });
    assertThat(Files.exists(dir.resolve("rank0.json"))).isTrue();
    assertThat(Files.exists(dir.resolve("rank1-group0.1.json"))).isTrue();
    String sub;
    try {
      sub = Files.readString(dir.resolve("rank1-group0.1.json"));
    } catch (java.io.IOException e) {
      throw new AssertionError(e);
    }
    assertThat(sub).contains("ALLREDUCE");
  }
}
