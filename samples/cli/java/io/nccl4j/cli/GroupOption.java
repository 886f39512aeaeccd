package io.nccl4j.cli;

import io.nccl4j.LocalCluster;
import io.nccl4j.ProcessGroup;
import io.nccl4j.cli.bench.SampleException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Optional;
import picocli.CommandLine.Option;

/**
 * {@code --group R1,R2,…}: run a command on that subgroup of the world. Every rank makes the group
 * (PyTorch's rule for {@code new_group}); the members run the command, the others idle until it ends.
 */
final class GroupOption {
  @Option(names = "--group", paramLabel = "R1,R2,...", split = ",",
      description = "Run on the subgroup of these world ranks; the other ranks make the group and idle.")
  int[] ranks;

  /** True when a subgroup was asked for. */
  boolean given() {
    return ranks != null && ranks.length > 0;
  }

  /** The number of ranks that run the command: the group's, else the world's. */
  int size(int worldSize) {
    if (!given()) {
      return worldSize;
    }
    int[] sorted = ranks.clone();
    Arrays.sort(sorted);
    for (int i = 0; i < sorted.length; i++) {
      if (sorted[i] < 0 || sorted[i] >= worldSize || (i > 0 && sorted[i] == sorted[i - 1])) {
        throw new SampleException(2, "--group needs distinct ranks in 0.." + (worldSize - 1) + ", got "
            + Arrays.toString(ranks));
      }
    }
    return sorted.length;
  }

  /** {@code task} run on the subgroup by its members; null from the other ranks. */
  <T> LocalCluster.RankCall<T> around(LocalCluster.RankCall<T> task) {
    if (!given()) {
      return task;
    }
    return world -> {
      Optional<ProcessGroup> g = world.newGroup(ranks);
      if (g.isEmpty()) {
        return null;
      }
      try (ProcessGroup sub = g.get()) {
        return task.call(sub);
      }
    };
  }

  /** The members' results in group-rank order, from every world rank's. */
  <T> List<T> members(List<T> byWorldRank) {
    if (!given()) {
      return byWorldRank;
    }
    int[] sorted = ranks.clone();
    Arrays.sort(sorted);
    List<T> out = new ArrayList<>();
    for (int r : sorted) {
      out.add(byWorldRank.get(r));
    }
    return out;
  }

  /** {@code world size 4}, or {@code group [0, 2, 4] (3 ranks) of world size 5}, for a header line. */
  String describe(int worldSize) {
    if (!given()) {
      return "world size " + worldSize;
    }
    int[] sorted = ranks.clone();
    Arrays.sort(sorted);
    return "group " + Arrays.toString(sorted) + " (" + sorted.length + " ranks) of world size " + worldSize;
  }
}
