package io.nccl4j.nccl;

import io.nccl4j.store.Store;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;

/**
 * Before a blocking communicator of NCCL ≥ 2.31 is finalized, its ranks agree through the group's
 * store that every one of them will finalize. From 2.31.2, commDestroySync — what
 * {@code ncclCommFinalize} runs — ends in an intra-node bootstrap barrier of every local rank, untimed,
 * skipped only under the abort flag (init.cc, {@code if (*comm->abortFlag == 0)
 * bootstrapIntraNodeBarrier(...)}): a peer that died unseen, or one that releases its part with
 * {@code ncclCommAbort}, holds it forever. Past the close deadline the only release would be an abort
 * while the finalize is still inside NCCL, which NCCL allows on nonblocking communicators only (on a
 * blocking one the abort frees the communicator under the finalize). So each rank first publishes
 * what it will do — finalize, or abort because its group failed — and finalizes only once every rank
 * said finalize within the deadline; otherwise it releases its part with {@code ncclCommAbort} without
 * entering finalize. A peer that dies after the agreement is the one case left, narrowed from the
 * whole life of the group to the moment between the agreement and the barrier.
 *
 * <p>Nonblocking communicators need no agreement (their finalize is a job NCCL's abort ends safely);
 * a group without a store cannot have one and finalizes as before.
 *
 * <p>The agreement's keys go with it: a rank done with them counts itself out under {@link #LEFT_KEY}, and the rank
 * whose count reaches the group's size — every rank has read what it needed — deletes them all, so that subgroups
 * made and closed in a loop leave nothing in the store.
 */
final class CloseAgreement {
  /** Where each rank's intention goes, under the group's store. */
  static final String PREFIX = "nccl/close/";
  private static final byte[] FINALIZE = "finalize".getBytes(StandardCharsets.UTF_8);
  private static final byte[] ABORT = "abort".getBytes(StandardCharsets.UTF_8);
  /** How many ranks are done with the agreement's keys; the last deletes them. */
  static final String LEFT_KEY = PREFIX + "left";

  private CloseAgreement() {}

  /** True when closing {@code comm} must first agree: NCCL ≥ 2.31, blocking, with peers, and a store to agree in. */
  static boolean needed(Communicator comm, Store store) {
    return store != null && comm.size() > 1 && !comm.isNonBlocking()
        && comm.nccl().version().atLeast(NcclVersion.V2_31);
  }

  /**
   * This rank's part: publishes its intention; when that is to finalize, waits up to {@code deadline}
   * for every rank's, and makes {@code comm} be released by abort unless all said finalize. Never
   * throws: a store that fails is a peer that cannot be trusted to take part.
   */
  static void agree(Communicator comm, Store store, Duration deadline) {
    try {
      decide(comm, store, deadline);
    } finally {
      leave(store, comm.size());
    }
  }

  /** This rank is done with the agreement's keys: it counts itself out, and the last deletes them. Never throws. */
  private static void leave(Store store, int size) {
    try {
      if (store.add(LEFT_KEY, 1) == size) {
        for (String k : NcclRendezvous.keys(PREFIX, size)) {
          store.deleteKey(k);
        }
        store.deleteKey(LEFT_KEY);
      }
    } catch (RuntimeException storeUnavailable) {
      // the keys stay with the job's store
    }
  }

  private static void decide(Communicator comm, Store store, Duration deadline) {
    boolean finalize = !comm.releasesByAbort();
    String why;
    try {
      NcclRendezvous.awaitAll(store, PREFIX, "to close the NCCL communicator", comm.rank(), comm.size(),
          finalize ? FINALIZE : ABORT, deadline);
      if (!finalize) {
        return;
      }
      List<byte[]> notes = store.multiGet(NcclRendezvous.keys(PREFIX, comm.size()), deadline);
      StringBuilder aborting = new StringBuilder();
      for (int r = 0; r < notes.size(); r++) {
        if (!java.util.Arrays.equals(notes.get(r), FINALIZE)) {
          aborting.append(aborting.length() == 0 ? "" : ", ").append(r);
        }
      }
      if (aborting.length() == 0) {
        return;
      }
      why = "rank(s) " + aborting + " of " + comm.size() + " release their part with ncclCommAbort, so they will not"
          + " take part in NCCL's finalize";
    } catch (RuntimeException e) { // the store's timeout, a connection that ended, a closed store
      if (!finalize) {
        return; // this rank aborts anyway; its peers see it missing
      }
      why = e.getMessage() + "; a rank that is not there would hold NCCL's finalize in its untimed destroy barrier";
    }
    comm.releaseWithAbort(why);
  }
}
