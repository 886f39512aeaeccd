package io.nccl4j;

import io.nccl4j.internal.concurrent.Durations;
import io.nccl4j.spi.Backend;
import io.nccl4j.spi.Collective;
import io.nccl4j.spi.Completions;
import io.nccl4j.spi.Fingerprint;
import io.nccl4j.store.Store;
import io.nccl4j.store.StoreTimeoutException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * Checks, before a collective is enqueued, that every rank is about to run the same one (see
 * {@link Validation}); on a mismatch the group is aborted and every rank throws the same kind of
 * error. CHEAP compares a hash of sequence number, op and count with one tiny all-reduce; DETAIL
 * exchanges whole fingerprints through the group's store and names each differing field.
 * Called under the group's monitor, in issue order.
 */
final class CrossRankValidation {
  private final Backend backend;
  private final FlightRecorderDumps dumps;
  private volatile Validation mode = Validation.fromEnvironment();
  private volatile Store store;
  private Tensor cheapBuffer;
  /** IN_BAND for a backend that cannot check in band, once there is a store; else null. */
  private FingerprintDigests digests;
  /** Whether this group's validation wrote keys in {@link #store}, which the last rank to close deletes. */
  private boolean wroteKeys;
  /** The last collective whose fingerprint DETAIL exchanged through the store; -1: none. */
  private long detailSeq = -1;
  /** Under the group's store: how many ranks have closed their validation; the last deletes its keys. */
  static final String LEFT_KEY = "nccl4j/validation/left";

  CrossRankValidation(Backend backend, FlightRecorderDumps dumps) {
    this.backend = backend;
    this.dumps = dumps;
    backend.validation(mode);
  }

  Validation mode() {
    return mode;
  }

  void set(Validation newMode, Store newStore) {
    if (newMode == Validation.DETAIL && newStore == null && store == null) {
      throw new IllegalArgumentException("DETAIL validation exchanges fingerprints through a store; none given");
    }
    if (newStore != null) {
      store = newStore;
    }
    mode = Objects.requireNonNull(newMode, "mode");
    backend.validation(newMode);
    if (digests != null && (newStore != null || !newMode.inBand())) {
      digests.stop(); // a new store, or none needed: every rank switches at this same point
      digests = null;
    }
    if (newMode.inBand() && !backend.checksInBand() && store != null && backend.size() > 1) {
      digests = new FingerprintDigests(backend, store, e -> {
        backend.abort(e);
        dumps.onFailure(e);
      });
      wroteKeys = true;
    }
  }

  /** The store every rank of the group shares, once {@link #set} gave one; else null. */
  Store store() {
    return store;
  }

  void validate(Collective c) {
    Validation m = mode;
    if (m == Validation.OFF || c.op().isPointToPoint()) {
      return;
    }
    FingerprintDigests d = digests;
    if (d != null) {
      d.record(c);
    }
    if (m == Validation.IN_BAND) {
      return;
    }
    Fingerprint mine = Fingerprint.of(c);
    Duration limit = c.timeoutOr(backend.timeout());
    if (m == Validation.CHEAP) {
      if (cheapAgrees(mine, limit)) {
        return;
      }
      if (store == null) {
        throw mismatch("Detected mismatch between collectives on ranks. Rank " + backend.rank()
            + " is running collective: " + mine + ", but another rank is running a collective with a different"
            + " sequence number, op type or element count (CHEAP validation compares only those; DETAIL names the"
            + " rank and every field).");
      }
    }
    detailed(mine, limit);
  }

  private boolean cheapAgrees(Fingerprint mine, Duration limit) {
    if (cheapBuffer == null) {
      cheapBuffer = Tensor.zeros(2, DType.INT64, backend.allocator());
    }
    long h = mine.cheapHash();
    try (Tensor host = Tensor.ofLongs(h, -h)) {
      cheapBuffer.copyFrom(host);
      Collective.Buffer b = cheapBuffer.collectiveBuffer();
      Collective check = Collective.Call.allReduce(-mine.seq(), b, b, ReduceOp.MAX).withTimeout(limit);
      java.util.concurrent.CompletableFuture<CollectiveStats> done = Completions.submit(backend, check,
          true);
      try {
        done.get(Durations.toMillis(Durations.plus(limit, Duration.ofSeconds(30))), TimeUnit.MILLISECONDS);
      } catch (ExecutionException e) {
        throw e.getCause() instanceof RuntimeException ? (RuntimeException) e.getCause()
            : new BackendException(String.valueOf(e.getCause()), e.getCause());
      } catch (TimeoutException | InterruptedException e) {
        throw new CollectiveTimeoutException("validation of collective #" + mine.seq() + " did not finish");
      }
      host.copyFrom(cheapBuffer);
      return host.getLong(0) == h && host.getLong(1) == -h;
    }
  }

  private void detailed(Fingerprint mine, Duration limit) {
    Store s = store;
    if (s == null) {
      throw new IllegalStateException("DETAIL validation (NCCL4J_DEBUG=DETAIL) exchanges fingerprints through a"
          + " store, and this group has none: call setValidation(mode, store) on every rank");
    }
    int rank = backend.rank();
    int size = backend.size();
    String prefix = "nccl4j/fingerprint/" + mine.seq() + "/";
    s.set(prefix + rank, mine.encode());
    wroteKeys = true;
    detailSeq = mine.seq();
    List<String> keys = new ArrayList<>();
    for (int r = 0; r < size; r++) {
      keys.add(prefix + r);
    }
    try {
      s.wait(keys, limit);
    } catch (StoreTimeoutException e) {
      List<Integer> absent = new ArrayList<>();
      for (int r = 0; r < size; r++) {
        if (!s.check(List.of(prefix + r))) {
          absent.add(r);
        }
      }
      CollectiveTimeoutException t = new CollectiveTimeoutException("Rank " + rank + " is running collective: "
          + mine + ", but ranks " + absent + " did not reach collective #" + mine.seq() + " within "
          + Durations.describe(limit), rank);
      backend.abort(t);
      throw t;
    }
    for (int r = 0; r < size; r++) {
      if (r == rank) {
        continue;
      }
      Fingerprint theirs = Fingerprint.decode(s.get(prefix + r, limit));
      String mismatch = Fingerprint.mismatch(mine, rank, theirs, r);
      if (mismatch != null) {
        throw mismatch(mismatch);
      }
    }
    // Every peer has published its fingerprint for this collective, so it has finished validating
    // the one before (validation runs in issue order): nobody reads this rank's key from two
    // collectives ago any more. (One ago may still be read by a peer issuing asynchronously.)
    if (mine.seq() > 2) {
      s.deleteKey("nccl4j/fingerprint/" + (mine.seq() - 2) + "/" + rank);
    }
  }

  private CollectiveMismatchException mismatch(String message) {
    CollectiveMismatchException e = new CollectiveMismatchException(message);
    backend.abort(e);
    dumps.onFailure(e);
    return e;
  }

  /**
   * Stops the digest checker, frees the CHEAP check's device buffer, and counts this rank out of the keys its
   * validation wrote in the group's store (digests, DETAIL's last two fingerprints of each rank): the last rank to
   * close deletes them — each peer has read what it needed by then — so that a closed group leaves nothing there.
   */
  void close() {
    boolean stopped = digests == null || digests.stop();
    if (cheapBuffer != null) {
      cheapBuffer.close();
    }
    Store s = store;
    if (s != null && wroteKeys && stopped) {
      leave(s);
    }
  }

  private void leave(Store s) {
    int size = backend.size();
    try {
      if (s.add(LEFT_KEY, 1) != size) {
        return;
      }
      List<String> keys = new ArrayList<>(FingerprintDigests.keys(size));
      // DETAIL deletes each rank's fingerprint two collectives back as it goes; the last two are left. The ranks
      // validated the same collectives (else the group failed), so this rank's last names every rank's.
      for (long q = Math.max(0, detailSeq - 1); q <= detailSeq; q++) {
        for (int r = 0; r < size; r++) {
          keys.add("nccl4j/fingerprint/" + q + "/" + r);
        }
      }
      keys.add(LEFT_KEY);
      for (String k : keys) {
        s.deleteKey(k);
      }
    } catch (RuntimeException storeUnavailable) {
      // the keys stay with the job's store
    }
  }
}
