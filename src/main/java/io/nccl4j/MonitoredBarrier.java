package io.nccl4j;

import io.nccl4j.internal.concurrent.Durations;
import io.nccl4j.store.Store;
import io.nccl4j.store.StoreTimeoutException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.function.Supplier;
import java.util.stream.Collectors;

/**
 * PyTorch's monitored_barrier, through the group's store instead of gloo's send/recv: every rank
 * but 0 announces its arrival and waits for rank 0's answer; rank 0 waits for each arrival in rank
 * order within the timeout and answers every rank at once, with nothing or with the failure, which
 * the ranks that arrived then report as PyTorch's do. Only rank 0 applies the timeout (the others
 * wait for its answer up to the timeout plus the group's), so that it is rank 0 that names the
 * ranks, not a rank that merely waited. Nothing reaches the backend: a monitored barrier is not
 * numbered, not in the flight recorder, and one that fails leaves the group usable: its backend never
 * saw it. Gloo's does not — its monitored barrier runs over the group's own connections, and a
 * timeout closes them, so the next collective fails ("Application timeout caused pair closure",
 * torch 2.13).
 * With {@code waitAllRanks}, rank 0 checks the ranks still missing once the timeout has passed
 * without waiting again, so that it names all of them within one timeout (gloo waits a full timeout
 * for each).
 */
final class MonitoredBarrier {
  /** How much of a failure text read from the store is quoted: it is another process's bytes. */
  private static final int MAX_QUOTED = 4096;
  private final ProcessGroup pg;
  private final Supplier<Store> store;
  private long calls;

  MonitoredBarrier(ProcessGroup pg, Supplier<Store> store) {
    this.pg = pg;
    this.store = store;
  }

  void run(Duration timeout, boolean waitAllRanks) {
    if (timeout == null || timeout.isNegative() || timeout.isZero()) {
      throw new IllegalArgumentException("timeout must be positive, got " + timeout);
    }
    Store s = store.get();
    if (s == null) {
      throw new IllegalStateException("rank " + pg.rank() + ": monitoredBarrier exchanges arrivals through the"
          + " group's store, and this group has none: call setValidation(mode, store) on every rank");
    }
    long n;
    synchronized (this) {
      n = ++calls;
    }
    if (pg.size() == 1) {
      return;
    }
    String prefix = "nccl4j/monitored_barrier/" + n + "/";
    if (pg.rank() != 0) {
      arrive(s, prefix, timeout);
    } else {
      monitor(s, prefix, timeout, waitAllRanks);
    }
  }

  private void arrive(Store s, String prefix, Duration timeout) {
    int rank = pg.rank();
    String failure = "Rank " + rank + " successfully reached monitoredBarrier, but received errors while waiting for"
        + " send/recv from rank 0. Please check rank 0 logs for faulty rank.";
    s.set(prefix + "arrived/" + rank, new byte[] {1});
    byte[] answer;
    try {
      answer = s.get(prefix + "release", Durations.plus(timeout, pg.timeout()));
    } catch (StoreTimeoutException e) {
      throw new CollectiveTimeoutException(failure + "\n Original exception: \n" + e.getMessage());
    }
    if (answer.length > 0) {
      String quoted = new String(answer, 0, Math.min(answer.length, MAX_QUOTED), StandardCharsets.UTF_8);
      throw new CollectiveTimeoutException(failure + "\n Original exception: \n" + quoted);
    }
  }

  private void monitor(Store s, String prefix, Duration timeout, boolean waitAllRanks) {
    long ms = timeout.toMillis();
    long start = System.nanoTime();
    long limit = Durations.toNanos(timeout);
    List<Integer> processed = new ArrayList<>();
    List<Integer> failed = new ArrayList<>();
    for (int k = 1; k < pg.size(); k++) {
      String key = prefix + "arrived/" + k;
      long remaining = limit - (System.nanoTime() - start);
      if (waitAllRanks) {
        if (remaining > 0 ? arrived(s, key, remaining) : s.check(List.of(key))) {
          processed.add(k);
        } else {
          failed.add(k);
        }
        continue;
      }
      if (remaining < 0) {
        String message = "Rank 0 timed out in monitoredBarrier after " + ms + " ms.\n" + (processed.isEmpty()
            ? "No ranks successfully processed in monitoredBarrier." : "Successfully processed ranks: "
                + join(processed));
        throw answer(s, prefix, new CollectiveTimeoutException(message, k), message);
      }
      try {
        s.wait(List.of(key), Duration.ofNanos(remaining));
        processed.add(k);
      } catch (StoreTimeoutException e) {
        String message = "[Rank 0]: Rank " + k + " failed to pass monitoredBarrier in " + ms + " ms";
        throw answer(s, prefix, new CollectiveTimeoutException(message + "\n Original exception: \n" + e.getMessage(),
            k), message);
      }
    }
    if (!failed.isEmpty()) {
      String message = "[Rank 0]: Ranks " + join(failed) + " failed to pass monitoredBarrier in " + ms + " ms";
      throw answer(s, prefix, new CollectiveTimeoutException(message, failed.get(0)), message);
    }
    s.set(prefix + "release", new byte[0]);
    for (int k : processed) {
      s.deleteKey(prefix + "arrived/" + k);
    }
  }

  private static boolean arrived(Store s, String key, long nanos) {
    try {
      s.wait(List.of(key), Duration.ofNanos(nanos));
      return true;
    } catch (StoreTimeoutException e) {
      return false;
    }
  }

  /** Tells the ranks that arrived why the barrier failed, and returns {@code e} for rank 0 to throw. */
  private static CollectiveTimeoutException answer(Store s, String prefix, CollectiveTimeoutException e,
      String message) {
    s.set(prefix + "release", message.getBytes(StandardCharsets.UTF_8));
    return e;
  }

  private static String join(List<Integer> ranks) {
    return ranks.stream().map(String::valueOf).collect(Collectors.joining(", "));
  }
}
