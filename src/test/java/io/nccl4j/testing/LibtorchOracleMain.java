package io.nccl4j.testing;

import java.util.Arrays;

/**
 * The entry point of the libtorch oracle's own JVM ({@link LibtorchOracle} starts it): libtorch's TCPStore as a
 * server or a client ({@link LibtorchStorePeer}), or ProcessGroupGloo's ranks as threads ({@link LibtorchGloo}).
 * Its class path holds bytedeco's javacpp, pytorch and openblas of one release and the test classes, nothing of
 * nccl4j's: so it uses none of nccl4j's classes, and none of the test classes but the oracle's own.
 *
 * <p>Usage: {@code store-server LIBUV | store-client PORT | store-stranger PORT | gloo CASES RESULTS}. Reports go
 * to stdout as {@link OracleReport} lines; libtorch's own output, and a failure's stack, to stderr. A watchdog ends
 * the JVM after {@code -Dnccl4j.oracle.limit.s} seconds (120 unless set), so that a test never waits on a stuck
 * oracle.
 */
public final class LibtorchOracleMain {
  private LibtorchOracleMain() {}

  public static void main(String[] args) throws Exception {
    long limit = Long.getLong("nccl4j.oracle.limit.s", 120);
    Thread watchdog = new Thread(() -> {
      try {
        // The watchdog's timer, not a wait for an event: the limit is already scaled by the test that set it.
        Thread.sleep(limit * 1000);
      } catch (InterruptedException e) {
        return;
      }
      System.err.println("libtorch oracle: still running after " + limit + " s (" + String.join(" ", args)
          + "); halting");
      Runtime.getRuntime().halt(3);
    }, "oracle-watchdog");
    watchdog.setDaemon(true);
    watchdog.start();
    if (args.length == 0) {
      throw new IllegalArgumentException("expected a mode (load, store-server, store-client, store-stranger, gloo),"
          + " got none");
    }
    String[] rest = Arrays.copyOfRange(args, 1, args.length);
    switch (args[0]) {
      case "load":
        // Only loads libtorch, filling JavaCPP's cache on a machine that has none (LibtorchOracle#warmCache).
        org.bytedeco.javacpp.Loader.load(org.bytedeco.pytorch.global.torch.class);
        System.out.println("libtorch loaded");
        break;
      case "store-server":
        LibtorchStorePeer.server(Boolean.parseBoolean(rest[0]));
        break;
      case "store-client":
        LibtorchStorePeer.client(Integer.parseInt(rest[0]));
        break;
      case "store-stranger":
        LibtorchStorePeer.stranger(Integer.parseInt(rest[0]));
        break;
      case "gloo":
        LibtorchGloo.run(java.nio.file.Path.of(rest[0]), java.nio.file.Path.of(rest[1]));
        break;
      default:
        throw new IllegalArgumentException("expected a mode (load, store-server, store-client, store-stranger,"
            + " gloo), got '" + args[0] + "'");
    }
    // libtorch's threads (the server's loop, gloo's) are not daemons: the oracle is done when its mode returns.
    System.out.flush();
    System.exit(0);
  }
}
