package io.nccl4j.internal.transport.process;

import io.nccl4j.internal.transport.GroupFailureState;
import io.nccl4j.store.Store;
import java.util.function.Consumer;

/**
 * A group's transport between processes as the host's shared memory sees it: who this rank is, where the group
 * rendezvouses, what names it, its one failure state, and where its windows attach. TCP implements it; the
 * shared memory of {@code transport.shm} is written against it, so that neither knows the other.
 */
public interface ProcessLink {
  int rank();

  int size();

  /** The group's rendezvous store. */
  Store store();

  /** The job's id (what the host's segments are named after, for an operator listing {@code /dev/shm}). */
  String jobId();

  /** This group's random id, which no other user can guess ahead of the group. */
  String groupId();

  /** The group's failure: what windows check and record. */
  GroupFailureState failures();

  /** The group's failure as its store holds it: what windows adopt when a host-mate's failure is not theirs yet. */
  StoredFailure stored();

  /**
   * Gives this group the windows between its host's processes ({@code windows}; null when it has none), and how a
   * subgroup made from it gets its own ({@code subgroups}: called with the subgroup's link, collectively over its
   * members, as making the subgroup is).
   */
  void attach(HostWindows windows, Consumer<ProcessLink> subgroups);
}
