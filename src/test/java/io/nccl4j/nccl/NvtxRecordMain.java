package io.nccl4j.nccl;

import io.nccl4j.trace.Range;

/**
 * Child-JVM program of {@link NvtxInjectionTest}. {@code ranges}: loads NVTX, prints
 * {@code nvtx: <how>} and opens the ranges direct → inner with a mark "m" inside (exit 3 when NVTX
 * is not loaded). {@code cli ARGS...}: runs {@code ./nccl4j ARGS} and exits with its code.
 */
public final class NvtxRecordMain {
  private NvtxRecordMain() {}

  public static void main(String[] args) {
    System.setProperty("java.awt.headless", "true");
    if (args.length > 0 && args[0].equals("ranges")) {
      String how = Nvtx.ensureLoaded();
      System.out.println("nvtx: " + how);
      System.out.flush();
      if (!Nvtx.isActive()) {
        System.exit(3);
      }
      try (Range direct = Range.push("direct")) {
        try (Range inner = Range.push("inner")) {
          Nvtx.mark("m");
        }
      }
      System.out.println("ranges done");
      System.out.flush();
      System.exit(0);
    }
    if (args.length > 0 && args[0].equals("cli")) {
      String[] rest = java.util.Arrays.copyOfRange(args, 1, args.length);
      int code = io.nccl4j.cli.Cli.execute(rest);
      System.out.flush();
      System.err.flush();
      System.exit(code);
    }
    System.err.println("usage: NvtxRecordMain ranges | cli ARGS...");
    System.exit(2);
  }
}
