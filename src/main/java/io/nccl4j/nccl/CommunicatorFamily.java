package io.nccl4j.nccl;

import io.nccl4j.BackendException;

/**
 * The communicators of one rank that share peers: a group and the groups split from it. Once one of
 * them failed — a peer died, a collective timed out, NCCL reported an error — a peer of all of them
 * may be gone, and from NCCL 2.31 a finalize or destroy waits for every local rank at an untimed
 * barrier (commDestroySync, skipped only under the abort flag): each of them is then released with
 * {@code ncclCommAbort}, as PyTorch learned (pytorch#194775, #194679). A group made by shrinking
 * starts a family of its own: its ranks are the survivors.
 */
final class CommunicatorFamily {
  private volatile BackendException failure;

  /** Records the first failure of a member. */
  void failed(BackendException cause) {
    if (failure == null) {
      failure = cause;
    }
  }

  /** The first failure of a member, or null. */
  BackendException failure() {
    return failure;
  }
}
