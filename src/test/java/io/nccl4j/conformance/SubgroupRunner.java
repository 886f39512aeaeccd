package io.nccl4j.conformance;

import io.nccl4j.LocalCluster;
import io.nccl4j.ProcessGroup;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.function.IntFunction;

/**
 * Runs a conformance case on a subgroup of a larger world, so that group ranks differ from world
 * ranks: a group of 1 is rank {2} of 3, of 2 ranks {1, 3} of 4, of 3 ranks {0, 2, 4} of 5. The
 * other ranks make the group with everyone (PyTorch's rule) and then idle.
 */
final class SubgroupRunner implements ConformanceSuite.Runner {
  private final IntFunction<LocalCluster> world;

  SubgroupRunner(IntFunction<LocalCluster> world) {
    this.world = world;
  }

  static int[] members(int groupSize) {
    switch (groupSize) {
      case 1:
        return new int[] {2};
      case 2:
        return new int[] {1, 3};
      case 3:
        return new int[] {0, 2, 4};
      default:
        throw new IllegalArgumentException("no subgroup layout for " + groupSize + " ranks");
    }
  }

  @Override
  public <T> List<T> call(int groupSize, LocalCluster.RankCall<T> task) {
    int[] members = members(groupSize);
    int worldSize = members[members.length - 1] + 2;
    List<T> byWorldRank = world.apply(worldSize).call(pg -> {
      Optional<ProcessGroup> g = pg.newGroup(members);
      if (g.isEmpty()) {
        return null;
      }
      try (ProcessGroup sub = g.get()) {
        return task.call(sub);
      }
    });
    List<T> byGroupRank = new ArrayList<>();
    for (int m : members) {
      byGroupRank.add(byWorldRank.get(m));
    }
    return byGroupRank;
  }
}
