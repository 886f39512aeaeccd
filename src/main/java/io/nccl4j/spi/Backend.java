package io.nccl4j.spi;

import io.nccl4j.CollectiveStats;
import io.nccl4j.Device;
import io.nccl4j.memory.Allocator;
import io.nccl4j.store.Store;
import java.time.Duration;

/**
 * What a backend implements; {@link io.nccl4j.ProcessGroup} does the rest (checks, sequence
 * numbers, keeping buffers alive, Work handles). One instance per rank.
 *
 * <p>Contract: {@link #submit} and {@link #submitGroup} are called from one thread at a time, in the order
 * the application issued operations; their completions are reported in that order, once each; a backend
 * failure reports a {@link io.nccl4j.BackendException} and leaves the backend broken, so that every later
 * operation is reported failed with the same cause. One completion model for single operations and
 * groups: the caller's {@link Completion}.
 */
public interface Backend extends AutoCloseable {
  /**
   * What a backend is, fixed when it is made: its name, rank, the group's size, its device, the allocator of its
   * tensors and the timeout of its operations. Backends give it once; the getters below read it.
   *
   * @param name short name: {@code cpu}, {@code nccl}
   * @param rank this backend's rank, 0 … size − 1
   * @param size the number of ranks in the group, one backend each
   * @param device the device tensors must live on
   * @param allocator the allocator for this rank's tensors
   * @param timeout the timeout applied to every operation
   */
  record Identity(String name, int rank, int size, Device device, Allocator allocator, Duration timeout) {}

  /** What this backend is. */
  Identity identity();

  /** Short name: {@code cpu}, {@code nccl}. */
  default String name() {
    return identity().name();
  }

  /** This backend's rank, 0 … size − 1. */
  default int rank() {
    return identity().rank();
  }

  /** The number of ranks in the group, one backend each. */
  default int size() {
    return identity().size();
  }

  /** The device tensors must live on. */
  default Device device() {
    return identity().device();
  }

  /** The allocator for this rank's tensors. */
  default Allocator allocator() {
    return identity().allocator();
  }

  /** The timeout applied to every operation. */
  default Duration timeout() {
    return identity().timeout();
  }

  /**
   * Enqueues one operation and returns at once, reporting its outcome to {@code completion} — which may be called
   * before this returns, on this thread or another. With {@code callerWaits} (the blocking form of a collective) a
   * backend may run the operation on the calling thread when nothing is ahead of it, and return it completed. A
   * device stream waits for the operation through {@link #waitStream}. The caller keeps everything it needs at
   * completion in the one object it passes ({@link io.nccl4j.ProcessGroup} passes the operation's Work, which is
   * also the Collective); {@link Completions} adapts it to a future for callers that want one.
   *
   * @throws IllegalStateException when the backend is closed (the completion is then never called)
   */
  void submit(Collective collective, boolean callerWaits, Completion completion);

  /**
   * Makes {@code consumer} wait, without blocking the host, for {@code collective}, an operation
   * submitted with {@link #submit(Collective, boolean, Completion)}; nothing to do once it has
   * finished. Returns false when this backend has no device streams: the caller then waits on the
   * host.
   */
  default boolean waitStream(Collective collective, io.nccl4j.DeviceStream consumer) {
    return false;
  }

  /**
   * The group's cross-rank validation is now {@code mode} (at creation and when it changes): a
   * backend that can check fingerprints in band ({@link io.nccl4j.Validation#IN_BAND} and above)
   * does so from its next operation on. Ranks switch at different moments, so a backend compares
   * fingerprints only when both sides carry one. The default ignores it.
   */
  default void validation(io.nccl4j.Validation mode) {}

  /**
   * The store every rank of the group shares (its rendezvous store, or a namespace of it), given when
   * the group gets one ({@link io.nccl4j.ProcessGroup#setValidation}), for a backend whose ranks must
   * meet outside its data path: NCCL's, before a finalize that waits for every rank. The default
   * ignores it.
   */
  default void groupStore(Store store) {}

  /**
   * Whether this backend checks fingerprints in band itself ({@link #validation}); for one that
   * cannot (NCCL: nothing rides with the data), the process group compares digests of the issued
   * collectives through its store in the background instead. The default: false.
   */
  default boolean checksInBand() {
    return false;
  }

  /**
   * How long a thread waiting for one of this backend's operations polls for its completion before
   * it blocks, in nanoseconds; 0 (the default) blocks at once. Worth it for a backend whose
   * operations complete on a thread of its own while the waiter has a core to spare.
   */
  default long waitSpinNanos() {
    return 0;
  }

  /**
   * Creates this rank's backend of {@code group}, a group made of some of this group's ranks
   * ({@code newGroup}, {@code split}). Collective: every rank of this group calls it, in the same
   * order relative to its other calls, with the same {@code group} but its own colour and key; a rank
   * that is not a member gets null (on NCCL it still takes part in {@code ncclCommSplit}). The new
   * backend shares this one's device and allocator, has the same timeout, and is owned by the caller;
   * this backend stays usable. The default: unsupported.
   */
  default Backend subgroup(Subgroup group) {
    throw new UnsupportedOperationException("The " + name() + " backend cannot make subgroups");
  }

  /**
   * Creates this rank's backend of {@code survivors}, this group without the ranks it lists as
   * excluded ({@code ncclCommShrink}): called by every surviving rank, while this backend may be
   * broken by the failure of an excluded rank. Ranks keep their order. {@code store} is one the
   * survivors share (null when the group has none), for a backend whose failure left nothing to shrink
   * and that must rendezvous again (NCCL after an abort). The default: unsupported.
   */
  default Backend shrink(Subgroup survivors, Store store) {
    throw new UnsupportedOperationException("The " + name() + " backend cannot shrink a group");
  }

  /**
   * Device memory the backend holds for itself, outside its allocator (NCCL's buffers, channels,
   * proxies); -1 when it cannot tell, the default.
   */
  default long internalBytes() {
    return -1;
  }

  /**
   * The ranks this rank knows to have failed, first or later ({@link io.nccl4j.ProcessGroup#failedRanks}); empty
   * where the backend cannot tell (NCCL says that a peer failed, not which). Local.
   */
  default java.util.SortedSet<Integer> failedRanks() {
    return java.util.Collections.emptySortedSet();
  }

  /** Receives the outcome of one operation submitted with {@link #submit(Collective, boolean, Completion)}. */
  interface Completion {
    /** The operation started executing at {@code nanos} ({@link System#nanoTime()}); not called by backends that cannot tell. */
    default void started(long nanos) {}

    /**
     * Called once: with the statistics (or null when the backend has none) on success, or with the
     * failure, a {@link io.nccl4j.BackendException} (possibly wrapped in a CompletionException).
     */
    void completed(CollectiveStats stats, Throwable error);
  }

  /**
   * Enqueues several operations as one group (NCCL's ncclGroupStart/ncclGroupEnd): they may run
   * concurrently — a rank can send to and receive from the same peer in one group without
   * deadlock — and complete together, reported once to {@code completion}; a device stream waits for the
   * group through {@link #waitStream} with its first operation. The default runs them one after another,
   * which is only correct for groups without point-to-point cycles.
   *
   * @throws IllegalStateException when the backend is closed (the completion is then never called)
   */
  default void submitGroup(java.util.List<Collective> ops, Completion completion) {
    Completions.Countdown all = new Completions.Countdown(ops.size(), completion);
    for (Collective c : ops) {
      submit(c, false, all);
    }
  }

  /**
   * The stream that produces this rank's inputs and consumes its outputs (PyTorch's current
   * stream); operations wait for work already queued on it. Null restores the default. Backends
   * without device streams reject it.
   */
  default void setCurrentStream(io.nccl4j.DeviceStream stream) {
    throw new UnsupportedOperationException("The " + name() + " backend has no device streams");
  }

  /**
   * Fails every pending and later operation with {@code cause} at once, without waiting for
   * peers (NCCL's ncclCommAbort; for the CPU backend, failing the transport). Used when another
   * rank failed, or on timeout. Idempotent; the first cause wins.
   */
  void abort(io.nccl4j.BackendException cause);

  /** Drains enqueued work (bounded by the timeout) and releases the backend's resources. Idempotent. */
  @Override
  void close();
}
