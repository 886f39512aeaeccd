package io.nccl4j.nccl;

import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.locks.ReentrantLock;

/**
 * One lock per CUDA device of this process, taken around each NCCL call of communicators that share
 * a device with others of the process: NCCL's thread-safety rules forbid issuing operations to
 * independent communicators of one device from several threads at once.
 */
final class DeviceLocks {
  private static final Map<Integer, ReentrantLock> LOCKS = new ConcurrentHashMap<>();

  private DeviceLocks() {}

  static ReentrantLock of(int device) {
    return LOCKS.computeIfAbsent(device, d -> new ReentrantLock());
  }
}
