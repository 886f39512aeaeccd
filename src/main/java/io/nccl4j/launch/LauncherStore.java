package io.nccl4j.launch;

import io.nccl4j.store.JobIdentity;
import io.nccl4j.store.TcpStore;
import java.net.InetAddress;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;

/**
 * The job's store when {@link Launcher} hosts it, as torchrun's agent hosts its workers' store: the launcher of
 * node 0 listens on MASTER_PORT and tells every rank it starts so ({@value #ENV}{@code =1}), and every rank, rank
 * 0 included, joins it as a client. So no rank's death takes the store with it: the survivors of a failed rank can
 * still learn of it there and rendezvous again (a shrunk group). The launcher also watches what the ranks leave in
 * it: the first failure a group records there ({@link GroupFailure}) is the one the launcher blames, whichever rank
 * exits first. It publishes that failure under {@link #FIRST_FAILURE_KEY} for the launchers of the other nodes,
 * which read it from there once their ranks have ended ({@link #arriveAndRead}); and, as torchrun's agents meet at
 * an exit barrier, it keeps the store up until they all have ({@link #awaitLaunchers}), so that ranks of other
 * nodes that outlive node 0's keep it too.
 */
final class LauncherStore implements AutoCloseable {
  /** The variable that tells a rank the launcher hosts the job's store: {@code 1}; unset, empty or {@code 0}: not. */
  static final String ENV = "NCCL4J_LAUNCHER_STORE";
  /** Where the hosting launcher leaves the first failure it saw, for the launchers of the other nodes. */
  static final String FIRST_FAILURE_KEY = "nccl4j/launcher/first-failure";
  /** The launchers that joined the job: node 0's, and each other node's once it reached the store. */
  static final String STARTED_KEY = "nccl4j/launcher/started";
  /** The launchers whose ranks have all ended: the hosting launcher keeps the store up until each that joined has. */
  static final String DONE_KEY = "nccl4j/launcher/done";
  /** How long a launcher waits for the store: its own server at once, another node's a moment. */
  private static final Duration TIMEOUT = Duration.ofSeconds(30);

  private final TcpStore client;
  /** The first failure a group left in the store, as its value (a {@link GroupFailure} frame). */
  private final AtomicReference<byte[]> first = new AtomicReference<>();
  private final AtomicBoolean published = new AtomicBoolean();

  private LauncherStore(TcpStore client) {
    this.client = client;
  }

  /**
   * Whether {@code vars} say the launcher hosts the job's store (then this rank joins it as a client, whatever its
   * rank).
   *
   * @throws IllegalArgumentException naming the variable when it is neither 0 nor 1
   */
  static boolean hostedByLauncher(Map<String, String> vars) {
    String v = vars.get(ENV);
    if (v == null || v.isBlank() || v.trim().equals("0")) {
      return false;
    }
    if (v.trim().equals("1")) {
      return true;
    }
    throw new IllegalArgumentException(ENV + " must be 0 or 1, got '" + v.trim() + "' (./nccl4j run sets it to 1"
        + " when it hosts the job's store)");
  }

  /**
   * Starts the job's store on {@code bind}:{@code port} (port 0: a free one) for {@code job}'s clients, and watches
   * the failures the ranks' groups leave there.
   *
   * @throws IllegalStateException naming the port when it cannot be bound
   */
  static LauncherStore host(InetAddress bind, int port, JobIdentity job, boolean admitPyTorch) {
    TcpStore client = TcpStore.hostAndConnect(bind, port, TIMEOUT, job, admitPyTorch);
    client.add(STARTED_KEY, 1);
    LauncherStore s = new LauncherStore(client);
    // Keys arrive as clients send them, after PyTorch's "/": "/pg1/transport/failure", "/pg1/group/0.1/transport/…".
    client.server().watch(k -> k.endsWith("/" + GroupFailure.KEY), (k, v) -> {
      if (GroupFailure.parse(v).isPresent()) {
        s.first.compareAndSet(null, v);
      }
    });
    return s;
  }

  /** The port the store listens on. */
  int port() {
    return client.server().port();
  }

  /** The first failure a group of the job left in the store, if any has. */
  Optional<GroupFailure> firstFailure() {
    byte[] v = first.get();
    return v == null ? Optional.empty() : GroupFailure.parse(v);
  }

  /**
   * Leaves the first failure under {@link #FIRST_FAILURE_KEY}, once, when there is one: called from the launcher's
   * loop, never from the watch (which runs while the store is locked, and a client's write would wait for it).
   */
  void publish() {
    byte[] v = first.get();
    if (v != null && published.compareAndSet(false, true)) {
      try {
        client.compareSet(FIRST_FAILURE_KEY, new byte[0], v);
      } catch (RuntimeException e) {
        // only the other nodes' launchers read it; they fall back on what their own ranks did
      }
    }
  }

  /** This node's ranks have all ended: one more launcher done. */
  void arrive() {
    client.add(DONE_KEY, 1);
  }

  /**
   * Waits until every launcher that joined the job has arrived, up to {@code atMost}, or until {@code stop} says to
   * give up (the launcher is being stopped); true when they all did. A node whose launcher never reached the store
   * (never started, or could not) is not waited for.
   */
  boolean awaitLaunchers(Duration atMost, java.util.function.BooleanSupplier stop) {
    long until = System.nanoTime() + atMost.toNanos();
    while (client.add(DONE_KEY, 0) < client.add(STARTED_KEY, 0)) {
      if (stop.getAsBoolean() || System.nanoTime() - until > 0) {
        return false;
      }
      try {
        Thread.sleep(100);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        return false;
      }
    }
    return true;
  }

  /**
   * For the launcher of another node, as it starts its ranks: joins the job at node 0's store (retrying, on a thread
   * of its own, until node 0's launcher listens), so that node 0's keeps the store up for this node's ranks.
   * Interrupting the thread ends its retries (the launcher does once its ranks have ended).
   */
  static Thread join(String host, int port, JobIdentity job) {
    Thread t = new Thread(() -> {
      try (TcpStore s = TcpStore.connect(host, port, Duration.ofMinutes(10), job)) {
        s.add(STARTED_KEY, 1);
      } catch (RuntimeException e) {
        // node 0's launcher is not there: it waits for no one of this node, and this node's ranks fail to join
      }
    }, "nccl4j-launcher-join");
    t.setDaemon(true);
    t.start();
    return t;
  }

  /**
   * For the launcher of another node, once its ranks have all ended: tells the hosting launcher at
   * {@code host}:{@code port} so, and reads the first failure it published; empty when it published none or
   * cannot be reached within a few seconds (it has given up waiting, or was stopped).
   */
  static Optional<GroupFailure> arriveAndRead(String host, int port, JobIdentity job) {
    try (TcpStore s = TcpStore.connect(host, port, Duration.ofSeconds(3), job)) {
      s.add(DONE_KEY, 1);
      return s.check(List.of(FIRST_FAILURE_KEY))
          ? GroupFailure.parse(s.get(FIRST_FAILURE_KEY, Duration.ofSeconds(1))) : Optional.empty();
    } catch (RuntimeException e) {
      return Optional.empty();
    }
  }

  /** Closes the store (the client closes the server it hosts): the launcher does once every local rank has ended. */
  @Override
  public void close() {
    client.close();
  }
}
