package io.nccl4j.nccl;

import io.nccl4j.Settings;
import io.nccl4j.internal.bind.nccl.NcclConfig;
import java.time.Duration;

/**
 * How a {@link Communicator} is created.
 *
 * <p>Blocking by default, as in PyTorch (which makes communicators nonblocking only under
 * {@code TORCH_NCCL_USE_COMM_NONBLOCKING}): with {@code config.blocking = 0} every
 * {@code ncclGroupEnd} that has work — so every collective — starts a thread inside NCCL and
 * returns {@code ncclInProgress}, a cost of tens of microseconds per call that the default must not
 * pay. A rank that never joins is caught before NCCL is called: the ranks meet at a store barrier
 * with the timeout first ({@link NcclRendezvous}). Nonblocking is the choice for those who need
 * NCCL's own guarantee that {@code ncclCommAbort} can stop any call at any point
 * ({@code NCCL4J_NCCL_NONBLOCKING=1}, or {@link #withNonBlocking}), and it is forced where threads
 * of one process drive independent communicators of one GPU ({@link #withSharedDevice}): NCCL forbids
 * calling communicators of one device from several threads at once, so their calls are serialised
 * per device, which only nonblocking calls (that never wait for a peer) can survive. Ranks of one
 * communicator never share a GPU as threads ({@link NcclPlacement}).
 *
 * @param nonBlocking ask NCCL for a nonblocking communicator ({@code NCCL_COMM_BLOCKING} in the
 *     environment still overrides it, in NCCL and in {@link Communicator#mode()})
 * @param maxCTAs {@code ncclConfig_t.maxCTAs}, or {@link NcclConfig#UNDEF} for NCCL's choice (and
 *     {@code NCCL_MAX_CTAS}); small values let two ranks (processes) share a GPU
 * @param sharedDevice other communicators of this process use the same device, from other threads:
 *     calls are serialised per device, and the communicator is nonblocking
 * @param abortGrace how long an abort waits for a call in progress on another thread before it
 *     aborts without it (see {@link Communicator#abort(Duration)})
 * @param allocation where the group's tensors come from (plain, registered, symmetric windows); the
 *     same on every rank
 */
public record CommOptions(boolean nonBlocking, int maxCTAs, boolean sharedDevice, Duration abortGrace,
    NcclAllocation allocation) {
  /** How long an abort waits for a call on another thread by default. */
  public static final Duration DEFAULT_ABORT_GRACE = Duration.ofSeconds(2);

  /**
   * Blocking unless {@code NCCL4J_NCCL_NONBLOCKING=1}; NCCL chooses the CTAs; the allocation from
   * {@code NCCL4J_NCCL_ALLOCATOR} (plain by default).
   */
  public static CommOptions fromEnvironment() {
    return new CommOptions("1".equals(Settings.NCCL4J_NCCL_NONBLOCKING.get()), NcclConfig.UNDEF, false,
        DEFAULT_ABORT_GRACE, NcclAllocation.fromEnvironment());
  }

  /** Blocking, NCCL's defaults, plain memory: what the tests start from, independent of the environment. */
  public static CommOptions blocking() {
    return new CommOptions(false, NcclConfig.UNDEF, false, DEFAULT_ABORT_GRACE, NcclAllocation.PLAIN);
  }

  /** These options, asking NCCL for a nonblocking communicator when {@code nb} is true. */
  public CommOptions withNonBlocking(boolean nb) {
    return new CommOptions(nb, maxCTAs, sharedDevice, abortGrace, allocation);
  }

  /** These options with {@code ncclConfig_t.maxCTAs} {@code n} ({@link NcclConfig#UNDEF}: NCCL's choice). */
  public CommOptions withMaxCTAs(int n) {
    return new CommOptions(nonBlocking, n, sharedDevice, abortGrace, allocation);
  }

  /**
   * For a communicator whose GPU other communicators of this process use too, from other threads:
   * nonblocking, calls serialised per device.
   */
  public CommOptions withSharedDevice() {
    return new CommOptions(true, maxCTAs, true, abortGrace, allocation);
  }

  /** These options with {@code grace} as the time an abort waits for a call in progress on another thread. */
  public CommOptions withAbortGrace(Duration grace) {
    return new CommOptions(nonBlocking, maxCTAs, sharedDevice, grace, allocation);
  }

  /** These options with the group's tensors allocated as {@code a} says (the same on every rank). */
  public CommOptions withAllocation(NcclAllocation a) {
    return new CommOptions(nonBlocking, maxCTAs, sharedDevice, abortGrace, a);
  }

  NcclConfig config() {
    return NcclConfig.DEFAULT.withBlocking(!nonBlocking).withMaxCTAs(maxCTAs);
  }
}
