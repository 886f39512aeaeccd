package io.nccl4j.spi;

import java.util.Arrays;

/**
 * A group made from another one ({@link Backend#subgroup}, {@link Backend#shrink}), as its backend
 * sees it. Every rank that takes part computes the same one from what the ranks exchanged, so a
 * backend can use {@link #id} to find its peers' halves (the in-JVM fabric of the new group, the
 * store namespace of its rendezvous).
 *
 * @param id unique among the groups made from one root group, the same on every member, e.g.
 *     {@code 0.2} for the second group made from the world
 * @param members the parent's ranks that belong to the new group, in new-rank order: member i is
 *     the new group's rank i
 * @param color the colour this rank asked for (NCCL's {@code ncclCommSplit}); {@link #NO_COLOR} for
 *     a rank that is not a member
 * @param key this rank's ordering key within its colour
 */
public record Subgroup(String id, int[] members, int color, int key) {
  /**
   * NCCL's {@code NCCL_SPLIT_NOCOLOR}: the rank takes part in the split but joins no group. Applications pass
   * {@code ProcessGroup.NO_COLOR}, the same value; backends read it here.
   */
  public static final int NO_COLOR = -1;

  /** Copies {@code members}, so that the record cannot change under its holder. */
  public Subgroup {
    members = members.clone();
  }

  /** The members, in new-rank order (a copy). */
  @Override
  public int[] members() {
    return members.clone();
  }

  /** The number of ranks of the new group. */
  public int size() {
    return members.length;
  }

  /** The new group's rank of the parent's rank {@code parentRank}, or -1 when it is not a member. */
  public int rankOf(int parentRank) {
    for (int i = 0; i < members.length; i++) {
      if (members[i] == parentRank) {
        return i;
      }
    }
    return -1;
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof Subgroup s && id.equals(s.id) && Arrays.equals(members, s.members) && color == s.color
        && key == s.key;
  }

  @Override
  public int hashCode() {
    return id.hashCode() * 31 + Arrays.hashCode(members);
  }

  @Override
  public String toString() {
    return "group " + id + " of ranks " + Arrays.toString(members);
  }
}
