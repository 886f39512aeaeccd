package io.nccl4j.internal.transport.shm;
import io.nccl4j.Settings;
import io.nccl4j.internal.bind.cpu.CpuKernels;
import io.nccl4j.memory.NativeMemory;

/**
 * Sleeping on a word of memory several processes map, woken by any of them (Linux's shared futex,
 * through nccl4j's CPU kernel library): how a process waiting in a shared-memory window gives its core
 * away and still wakes within microseconds of the last arrival. Without the library the callers park in
 * short slices instead ({@link #available()} false).
 */
final class Futex {
  private static final boolean AVAILABLE = load();

  private Futex() {}

  private static boolean load() {
    if ("0".equals(Settings.SHM_FUTEX_PROPERTY.get())) {
      return false;
    }
    try {
      // The word is not changed by a wake with nobody asleep: a harmless first call proves the symbol.
      long probe = NativeMemory.allocate(8);
      try {
        CpuKernels.nccl4j_futex_wake(probe);
      } finally {
        NativeMemory.free(probe);
      }
      return true;
    } catch (Throwable e) {
      return false;
    }
  }

  static boolean available() {
    return AVAILABLE;
  }

  /** Sleeps while the low 32 bits of the long at {@code address} are {@code expected}, for at most {@code nanos}. */
  static void await(long address, int expected, long nanos) {
    CpuKernels.nccl4j_futex_wait(address, expected, Math.max(1, nanos));
  }

  /** Wakes every sleeper on the word at {@code address}. */
  static void wakeAll(long address) {
    CpuKernels.nccl4j_futex_wake(address);
  }
}
