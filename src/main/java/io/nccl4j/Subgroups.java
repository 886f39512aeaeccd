package io.nccl4j;

import io.nccl4j.spi.Subgroup;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.List;
import java.util.Optional;
import java.util.SortedSet;
import java.util.TreeSet;
import java.util.stream.Collectors;
import java.util.stream.IntStream;

/**
 * Where a group sits among the groups of its job — its name, the world ranks of its members — and how
 * groups are made from it: the checks, the agreement of the ranks and the names of
 * {@link ProcessGroup#newGroup}, {@link ProcessGroup#split} and {@link ProcessGroup#shrink}, which
 * hand the group they compute to {@link ProcessGroup#derive} for its backend.
 *
 * <p>Names follow the order of creation, as PyTorch's group names do: the world is {@code 0}, the
 * n-th group made from group {@code g} is {@code g.n}. Every rank of a group makes its groups in the
 * same order (PyTorch's rule), so every rank computes the same name without talking to the others;
 * a split makes one group per colour, {@code g.n:c}.
 */
final class Subgroups {
  /** The most ranks a membership bitmap in the split exchange describes; more than any job nccl4j runs. */
  private static final int MAX_EXCHANGE_RANKS = 1 << 16;

  private final String name;
  /** World rank of each rank of this group. */
  private final int[] globalRanks;
  /** Groups made from this one so far; touched under the group's monitor. */
  private int made;

  private Subgroups(String name, int[] globalRanks) {
    this.name = name;
    this.globalRanks = globalRanks;
  }

  /** A root group (the world) of {@code size} ranks. */
  static Subgroups world(int size) {
    int[] ranks = new int[size];
    Arrays.setAll(ranks, i -> i);
    return new Subgroups("0", ranks);
  }

  String name() {
    return name;
  }

  int size() {
    return globalRanks.length;
  }

  int[] globalRanks() {
    return globalRanks.clone();
  }

  int globalRank(int groupRank) {
    if (groupRank < 0 || groupRank >= globalRanks.length) {
      throw new IllegalArgumentException("Group rank " + groupRank + " is not part of group " + name + " (ranks 0.."
          + (globalRanks.length - 1) + ")");
    }
    return globalRanks[groupRank];
  }

  int groupRank(int globalRank) {
    for (int i = 0; i < globalRanks.length; i++) {
      if (globalRanks[i] == globalRank) {
        return i;
      }
    }
    throw new IllegalArgumentException("Global rank " + globalRank + " is not part of group " + name + " (world ranks "
        + Arrays.toString(globalRanks) + ")");
  }

  /** The name the next group made from this one gets. */
  String nextName() {
    return name + "." + (++made);
  }

  /** The group {@code child} as seen from the world: its members' world ranks. */
  Subgroups child(Subgroup child) {
    int[] members = child.members();
    int[] global = new int[members.length];
    for (int i = 0; i < members.length; i++) {
      global[i] = globalRanks[members[i]];
    }
    return new Subgroups(child.id(), global);
  }

  // ------------------------------------------------------------------ making groups from {@code pg}, this group

  /** {@link ProcessGroup#newGroup}: the members agree on {@code ranks} through one all-gather on {@code pg}. */
  Optional<ProcessGroup> newGroup(ProcessGroup pg, int[] ranks) {
    int[] members = checkedMembers(ranks, pg.size());
    boolean member = Arrays.binarySearch(members, pg.rank()) >= 0;
    return made(pg, member ? 0 : Subgroup.NO_COLOR, pg.rank(), members);
  }

  /** {@link ProcessGroup#split}: every rank's colour and key, through one all-gather on {@code pg}. */
  Optional<ProcessGroup> split(ProcessGroup pg, int color, int key) {
    if (color < Subgroup.NO_COLOR) {
      throw new UsageException("split: the colour must be non-negative, or NO_COLOR (-1) to join no group",
          "got " + color);
    }
    return made(pg, color, key, null);
  }

  /** {@link ProcessGroup#shrink}: no collective on {@code pg}, whose dead ranks could not take part. */
  ProcessGroup shrink(ProcessGroup pg, int[] excludedRanks) {
    int[] excluded = checkedMembers(excludedRanks, pg.size());
    int rank = pg.rank();
    if (Arrays.binarySearch(excluded, rank) >= 0) {
      throw new UsageException("shrink_group: a rank cannot exclude itself", "rank " + rank + " is in "
          + Arrays.toString(excluded));
    }
    SortedSet<Integer> dead = new TreeSet<>(pg.failedRanks());
    for (int r : excluded) {
      dead.remove(r);
    }
    if (!dead.isEmpty()) {
      // Excluding them here alone would give this rank another group than its peers, who may not know yet.
      SortedSet<Integer> all = new TreeSet<>(pg.failedRanks());
      for (int r : excluded) {
        all.add(r);
      }
      throw new IllegalStateException("rank " + rank + " cannot shrink the group to exclude "
          + Arrays.toString(excluded) + " only: rank" + (dead.size() == 1 ? " " : "s ") + listed(dead)
          + (dead.size() == 1 ? " has" : " have") + " failed too, and a group with a dead member fails its first"
          + " collective; exclude every failed rank: shrink(" + listed(all) + ")");
    }
    int[] survivors = IntStream.range(0, pg.size()).filter(r -> Arrays.binarySearch(excluded, r) < 0).toArray();
    return pg.derive(() -> new Subgroup(nextName(), survivors, 0, rank), true);
  }

  private static String listed(SortedSet<Integer> ranks) {
    return ranks.stream().map(String::valueOf).collect(Collectors.joining(", "));
  }

  private Optional<ProcessGroup> made(ProcessGroup pg, int color, int key, int[] ranks) {
    long[][] all = pg.allGatherLongs(proposal(pg.size(), color, key, ranks));
    if (ranks != null) {
      String problem = disagreement(all);
      if (problem != null) {
        throw new UsageException(problem, "rank " + pg.rank() + " of group " + name);
      }
    }
    int[] members = color >= 0 ? membersOf(all, color) : new int[0];
    return Optional.ofNullable(pg.derive(() -> new Subgroup(nextName() + (ranks == null && color >= 0 ? ":" + color
        : ""), members, color, key), false));
  }

  // ------------------------------------------------------------------ agreeing on a new group

  /**
   * What one rank says when a group is made from its group: its colour and key, and for
   * {@code newGroup} the ranks it passed, as a bitmap (so that ranks passing different lists are
   * told which).
   */
  static long[] proposal(int size, int color, int key, int[] ranks) {
    if (size > MAX_EXCHANGE_RANKS) {
      throw new UnsupportedOperationException("making subgroups of a group of " + size + " ranks; at most "
          + MAX_EXCHANGE_RANKS);
    }
    long[] p = new long[2 + words(size)];
    p[0] = color;
    p[1] = key;
    if (ranks != null) {
      for (int r : ranks) {
        p[2 + r / 64] |= 1L << (r % 64);
      }
    }
    return p;
  }

  static int words(int size) {
    return (size + 63) / 64;
  }

  /**
   * The members of colour {@code color} from every rank's proposal ({@code all[r]} is rank r's), in
   * new-rank order: by key, then by rank (NCCL's and PyTorch's order).
   */
  static int[] membersOf(long[][] all, int color) {
    List<Integer> members = new ArrayList<>();
    for (int r = 0; r < all.length; r++) {
      if (all[r][0] == color) {
        members.add(r);
      }
    }
    members.sort(Comparator.<Integer>comparingLong(r -> all[r][1]).thenComparingInt(r -> r));
    return members.stream().mapToInt(Integer::intValue).toArray();
  }

  /**
   * Null when every rank passed the same ranks to {@code newGroup}; else PyTorch's rule and the
   * ranks that broke it, the same text on every rank.
   */
  static String disagreement(long[][] all) {
    List<Integer> differ = new ArrayList<>();
    for (int r = 1; r < all.length; r++) {
      if (!Arrays.equals(all[r], 2, all[r].length, all[0], 2, all[0].length)) {
        differ.add(r);
      }
    }
    if (differ.isEmpty()) {
      return null;
    }
    StringBuilder b = new StringBuilder("new_group: every rank of the group must pass the same ranks, but rank 0 passed "
        + Arrays.toString(bits(all[0])));
    for (int r : differ) {
      b.append(", rank ").append(r).append(" passed ").append(Arrays.toString(bits(all[r])));
    }
    return b.toString();
  }

  private static int[] bits(long[] proposal) {
    List<Integer> ranks = new ArrayList<>();
    for (int w = 2; w < proposal.length; w++) {
      for (int b = 0; b < 64; b++) {
        if ((proposal[w] & (1L << b)) != 0) {
          ranks.add((w - 2) * 64 + b);
        }
      }
    }
    return ranks.stream().mapToInt(Integer::intValue).toArray();
  }

  /**
   * The ranks of {@code newGroup(ranks)}, sorted as PyTorch sorts them, with torch.distributed.new_group's checks in
   * its order and with its messages (torch 2.13): no rank twice, no more ranks than the group has, each a rank of
   * the group. An empty list is nccl4j's own refusal (PyTorch would make a group without members).
   */
  static int[] checkedMembers(int[] ranks, int size) {
    if (ranks == null || ranks.length == 0) {
      throw new UsageException("new_group: the ranks of the new group must not be empty",
          "pass the ranks of this group that form the new one");
    }
    int[] sorted = ranks.clone();
    Arrays.sort(sorted);
    for (int i = 1; i < sorted.length; i++) {
      if (sorted[i] == sorted[i - 1]) {
        throw new UsageException("ranks list must not contain duplicate entries, got " + Arrays.toString(sorted),
            "rank " + sorted[i] + " is listed more than once");
      }
    }
    if (sorted.length > size) {
      throw new UsageException("the new group's world size should be less or equal to the world size set by"
          + " init_process_group", sorted.length + " ranks for a group of " + size);
    }
    for (int r : sorted) {
      if (r < 0 || r >= size) {
        throw new UsageException("Rank " + r + " is out of range. Valid ranks are 0 to " + (size - 1) + " (world_size="
            + size + ")");
      }
    }
    return sorted;
  }
}
