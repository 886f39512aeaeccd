package io.nccl4j.internal.transport.process;

import io.nccl4j.Settings;
import java.util.Locale;

/** {@code NCCL4J_SHM}: whether the processes of one host share memory (the default) or talk over TCP only. */
public final class SharedMemorySwitch {
  private SharedMemorySwitch() {}

  /** Whether {@code NCCL4J_SHM} leaves shared memory on. */
  public static boolean enabled() {
    return enabled(Settings.NCCL4J_SHM.get());
  }

  /**
   * {@code NCCL4J_SHM}: unset, empty, 1, on, true or yes turn shared memory on; 0, off, false or no turn it off;
   * anything else is refused rather than read as one of them.
   */
  public static boolean enabled(String env) {
    String v = env == null ? "" : env.trim().toLowerCase(Locale.ROOT);
    switch (v) {
      case "", "1", "on", "true", "yes":
        return true;
      case "0", "off", "false", "no":
        return false;
      default:
        throw new IllegalArgumentException("NCCL4J_SHM must be 1, on, true or yes (shared memory between the"
            + " processes of a host, the default) or 0, off, false or no (TCP only), got '" + env + "'");
    }
  }
}
