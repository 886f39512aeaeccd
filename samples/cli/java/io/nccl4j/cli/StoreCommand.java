package io.nccl4j.cli;

import io.nccl4j.cli.bench.SampleException;
import io.nccl4j.store.JobIdentity;
import io.nccl4j.store.ListenerLimits;
import io.nccl4j.store.TcpStoreServer;
import java.net.InetAddress;
import java.net.UnknownHostException;
import java.util.concurrent.Callable;
import java.util.concurrent.CountDownLatch;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * {@code ./nccl4j store --port P [--host H]}: a store that PyTorch's TCPStore clients (both dialects) and nccl4j's
 * share, until stopped (Ctrl-C, SIGTERM). It belongs to no job, so it admits every client: what protects it is the
 * address it listens on (docs/RENDEZVOUS.md).
 */
@Command(name = "store", mixinStandardHelpOptions = true,
    header = "Serves a TCP store on PyTorch's wire, for PyTorch and nccl4j processes alike.",
    description = {"Serves a TCP store on PyTorch's wire until stopped, for PyTorch and nccl4j processes alike "
            + "(torch.distributed.TCPStore(host, port, n, False) joins it). It admits every client: listen on "
            + "an address only the job reaches (the default is the loopback)."})
final class StoreCommand implements Callable<Integer> {
  @Option(names = "--port", required = true, description = "TCP port to listen on (0: any free port, printed).")
  int port;

  @Option(names = "--host", defaultValue = "127.0.0.1",
      description = "Address to listen on (default: ${DEFAULT-VALUE}; 0.0.0.0: every interface).")
  String host;

  /** Counted down when the server is up (tests wait on it); the command then blocks until interrupted. */
  final CountDownLatch started = new CountDownLatch(1);
  volatile TcpStoreServer server;

  @Override
  public Integer call() throws InterruptedException {
    if (port < 0 || port > 65535) {
      throw new SampleException(ExitCodes.USAGE, "--port must be in 0..65535, got " + port);
    }
    InetAddress bind;
    try {
      bind = InetAddress.getByName(host);
    } catch (UnknownHostException e) {
      throw new SampleException(ExitCodes.USAGE, "--host '" + host + "' does not resolve");
    }
    TcpStoreServer s;
    try {
      s = TcpStoreServer.start(bind, port, JobIdentity.anonymous(), ListenerLimits.fromEnvironment(), true);
    } catch (IllegalStateException e) {
      throw new SampleException(ExitCodes.USAGE, e.getMessage());
    }
    server = s;
    try (s) {
      System.out.println("nccl4j store: serving on " + bind.getHostAddress() + ":" + s.port()
          + " (PyTorch: torch.distributed.TCPStore('" + bind.getHostAddress() + "', " + s.port()
          + ", world_size, False)); stop with Ctrl-C");
      System.out.flush();
      started.countDown();
      // The server's own exit hook closes it when the JVM is stopped.
      new CountDownLatch(1).await();
    }
    return 0;
  }
}
