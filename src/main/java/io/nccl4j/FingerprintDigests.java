package io.nccl4j;

import io.nccl4j.spi.Backend;
import io.nccl4j.spi.Collective;
import io.nccl4j.spi.Fingerprint;
import io.nccl4j.store.Store;
import io.nccl4j.store.StoreTimeoutException;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * {@link Validation#IN_BAND} for a backend that cannot carry fingerprints with its data (NCCL):
 * ranks compare digests of the collectives they issued through the group's store, off the
 * critical path, so that a mismatch is reported within about a second instead of returning wrong
 * data silently or hanging until the timeout.
 *
 * <p>On the issuing thread each collective costs a hash and a few array stores: its hash is folded
 * into a running digest, kept per sequence number for the last {@link #DIGESTS} collectives, and
 * its fields for the last {@link #FIELDS}. A daemon thread per group wakes every {@link #PERIOD},
 * publishes (last sequence number, digest) under {@code nccl4j/digest/<rank>} and compares the
 * digests its two neighbours published with its own at their sequence numbers; comparing both
 * neighbours means that of two adjacent ranks that differ, the one that is not behind finds it. A
 * digest covers every collective so far, so no mismatch falls between two looks.
 *
 * <p>A rank that finds one writes {@code nccl4j/digest/mismatch}; every rank's thread sees it, publishes
 * the fields of its recent collectives, reads those of the two ranks named, and fails its group with
 * the same {@link CollectiveMismatchException}: PyTorch's message for the first collective where
 * the two differ. Ranks that were running a collective that cannot complete (a root that differs)
 * get that error instead of the timeout. All-to-all split sizes are not in the digest (ranks
 * legitimately differ there); {@link Validation#DETAIL} checks them.
 */
final class FingerprintDigests implements AutoCloseable {
  private static final Logger LOG = LoggerFactory.getLogger(FingerprintDigests.class);
  static final Duration PERIOD = Duration.ofMillis(250);
  /** How many collectives back a neighbour's digest can be compared. */
  static final int DIGESTS = 1024;
  /** How many collectives back the fields that differ can be named. */
  static final int FIELDS = 64;
  private static final String PREFIX = "nccl4j/digest/";
  private static final String MISMATCH = PREFIX + "mismatch";

  private final Backend backend;
  private final Store store;
  private final int rank;
  private final int size;
  private final java.util.function.Consumer<CollectiveMismatchException> fail;

  // Written by the issuing thread only, without allocating; read by the checker after lastSeq.
  private final long[] seqs = new long[DIGESTS];
  private final long[] digests = new long[DIGESTS];
  private final long[] fieldSeqs = new long[FIELDS];
  private final OpType[] ops = new OpType[FIELDS];
  private final long[] inCounts = new long[FIELDS];
  private final long[] outCounts = new long[FIELDS];
  /** Null where the collective has no such buffer. */
  private final DType[] inTypes = new DType[FIELDS];
  private final DType[] outTypes = new DType[FIELDS];
  private final Device[] inDevices = new Device[FIELDS];
  private final Device[] outDevices = new Device[FIELDS];
  private final ReduceOp[] reduceOps = new ReduceOp[FIELDS];
  private final int[] peers = new int[FIELDS];
  private long digest;
  private volatile long lastSeq = -1;

  private final Thread checker;
  private volatile boolean closed;
  private long publishedSeq = -1;

  /**
   * Starts the checker of rank {@code backend.rank()}; {@code fail} fails the group with the
   * mismatch found (called on the checker's thread, once).
   */
  FingerprintDigests(Backend backend, Store store, java.util.function.Consumer<CollectiveMismatchException> fail) {
    this.backend = backend;
    this.store = store;
    this.rank = backend.rank();
    this.size = backend.size();
    this.fail = fail;
    this.checker = new Thread(this::run, "nccl4j-digest-rank" + rank);
    checker.setDaemon(true);
    checker.start();
  }

  /** Folds {@code c} into the digest; called in issue order, for collectives only. */
  void record(Collective c) {
    long s = c.seq();
    digest = mix(digest ^ hash(c));
    int i = (int) (s % DIGESTS);
    digests[i] = digest;
    seqs[i] = s;
    // Plain fields, not the buffers: those name memory blocks, which must not stay reachable.
    int f = (int) (s % FIELDS);
    fieldSeqs[f] = s;
    ops[f] = c.op();
    Collective.Buffer in = Fingerprint.comparedInput(c);
    Collective.Buffer out = Fingerprint.comparedOutput(c);
    inCounts[f] = in == null ? 0 : in.count();
    inTypes[f] = in == null ? null : in.dtype();
    inDevices[f] = in == null ? null : in.device();
    outCounts[f] = out == null ? 0 : out.count();
    outTypes[f] = out == null ? null : out.dtype();
    outDevices[f] = out == null ? null : out.device();
    reduceOps[f] = c.reduceOp();
    peers[f] = c.peer();
    lastSeq = s; // publishes the stores above to the checker
  }

  /**
   * What the digest covers: the fingerprint's fields, without all-to-all counts and splits. Ranks in other processes
   * compare digests, so nothing of it depends on an enum's declaration order: operations by their wire codes,
   * dtypes by NCCL's codes, the rest by their names (whose hashes Java specifies).
   */
  static long hash(Collective c) {
    boolean allToAll = c.op() == OpType.ALLTOALL;
    long h = mix(c.seq() * 0x9E3779B97F4A7C15L + c.op().wireCode());
    h = mix(h ^ buffer(Fingerprint.comparedInput(c), allToAll));
    h = mix(h ^ buffer(Fingerprint.comparedOutput(c), allToAll));
    ReduceOp op = c.reduceOp();
    h = mix(h ^ (op == null ? -1 : op.kind().name().hashCode() * 0x100000001B3L
        ^ Double.doubleToLongBits(op.scalar())));
    return mix(h ^ c.peer());
  }

  private static long buffer(Collective.Buffer b, boolean allToAll) {
    return b == null ? -7 : (allToAll ? 0 : b.count() * 31) + b.dtype().ncclCode() * 7L
        + b.device().type().name().hashCode();
  }

  private static long mix(long h) {
    h ^= h >>> 33;
    h *= 0xff51afd7ed558ccdL;
    h ^= h >>> 33;
    h *= 0xc4ceb9fe1a85ec53L;
    return h ^ (h >>> 33);
  }

  private void run() {
    while (!closed) {
      try {
        Thread.sleep(PERIOD.toMillis());
        if (closed) {
          return;
        }
        if (store.check(List.of(MISMATCH))) {
          report(store.get(MISMATCH, PERIOD));
          return;
        }
        publish();
        compareWith((rank + 1) % size);
        if (size > 2) {
          compareWith((rank + size - 1) % size);
        }
      } catch (InterruptedException e) {
        return;
      } catch (RuntimeException e) {
        if (closed) {
          return;
        }
        // The store went away (the job is ending) or answered oddly: this check is best effort and
        // must never fail the group itself.
        LOG.debug("rank {}: fingerprint digest check stopped: {}", rank, e.toString());
        return;
      }
    }
  }

  private void publish() {
    long s = lastSeq;
    if (s < 0 || s == publishedSeq) {
      return;
    }
    long d = digestAt(s);
    if (d == Long.MIN_VALUE) {
      return;
    }
    store.set(PREFIX + rank, ByteBuffer.allocate(16).putLong(s).putLong(d).array());
    publishedSeq = s;
  }

  /** The digest after collective {@code s}, or Long.MIN_VALUE when it is no longer (or not yet) kept. */
  private long digestAt(long s) {
    if (s < 0 || s > lastSeq || s <= lastSeq - DIGESTS + 1) {
      return Long.MIN_VALUE;
    }
    int i = (int) (s % DIGESTS);
    long d = digests[i];
    long at = seqs[i];
    // The slot is overwritten only by collective s + DIGESTS, which starts after lastSeq reached
    // s + DIGESTS - 1: if lastSeq is still below that after the loads above, they read collective s.
    java.lang.invoke.VarHandle.loadLoadFence();
    return at == s && lastSeq < s + DIGESTS - 1 ? d : Long.MIN_VALUE;
  }

  private void compareWith(int peer) {
    if (!store.check(List.of(PREFIX + peer))) {
      return;
    }
    ByteBuffer b = ByteBuffer.wrap(store.get(PREFIX + peer, PERIOD));
    if (b.remaining() != 16) {
      return;
    }
    long theirSeq = b.getLong();
    long theirDigest = b.getLong();
    long mine = digestAt(theirSeq);
    // The first finder's pair is every rank's report: ranks that find one at once must not name different pairs.
    if (mine != Long.MIN_VALUE && mine != theirDigest && store.add(PREFIX + "finders", 1) == 1) {
      store.set(MISMATCH, (rank + " " + peer + " " + theirSeq).getBytes(java.nio.charset.StandardCharsets.UTF_8));
    }
  }

  /** Every rank: publish the recent fields, read the two ranks' named in {@code found}, fail the group. */
  private void report(byte[] found) {
    String[] parts = new String(found, java.nio.charset.StandardCharsets.UTF_8).split(" ");
    int a = Integer.parseInt(parts[0]);
    int b = Integer.parseInt(parts[1]);
    long upTo = Long.parseLong(parts[2]);
    store.set(PREFIX + "fields/" + rank, encodeFields());
    String message;
    try {
      List<Fingerprint> mineA = decodeFields(store.get(PREFIX + "fields/" + a, Duration.ofSeconds(10)));
      List<Fingerprint> mineB = decodeFields(store.get(PREFIX + "fields/" + b, Duration.ofSeconds(10)));
      message = firstDifference(a, mineA, b, mineB, upTo);
    } catch (StoreTimeoutException e) {
      message = null;
    }
    if (message == null) {
      message = "Detected mismatch between collectives on ranks " + a + " and " + b + ": the digests of the"
          + " collectives they issued up to sequence number " + upTo + " differ, and the collective that differs is"
          + " no longer among the last " + FIELDS + " each keeps (NCCL4J_DEBUG=DETAIL names it when it runs)";
    }
    LOG.debug("rank {}: {}", rank, message);
    fail.accept(new CollectiveMismatchException(message));
  }

  private byte[] encodeFields() {
    StringBuilder sb = new StringBuilder();
    long s = lastSeq;
    for (long q = Math.max(0, s - FIELDS + 1); q <= s; q++) {
      int f = (int) (q % FIELDS);
      if (fieldSeqs[f] != q || ops[f] == null) {
        continue;
      }
      Collective.Buffer in = inTypes[f] == null ? null : new Collective.Buffer(0, inCounts[f], inTypes[f], inDevices[f]);
      Collective.Buffer out = outTypes[f] == null ? null
          : new Collective.Buffer(0, outCounts[f], outTypes[f], outDevices[f]);
      Collective c = new Collective.Call(ops[f], q, in, out, reduceOps[f], peers[f], null, null, null);
      sb.append(new String(Fingerprint.of(c).encode(), java.nio.charset.StandardCharsets.UTF_8)).append('\n');
    }
    return sb.toString().getBytes(java.nio.charset.StandardCharsets.UTF_8);
  }

  private static List<Fingerprint> decodeFields(byte[] bytes) {
    List<Fingerprint> out = new ArrayList<>();
    for (String line : new String(bytes, java.nio.charset.StandardCharsets.UTF_8).split("\n")) {
      if (!line.isEmpty()) {
        out.add(Fingerprint.decode(line.getBytes(java.nio.charset.StandardCharsets.UTF_8)));
      }
    }
    return out;
  }

  /** PyTorch's message for the first collective, up to {@code upTo}, where rank a's and b's differ; null if none kept does. */
  static String firstDifference(int a, List<Fingerprint> fa, int b, List<Fingerprint> fb, long upTo) {
    for (Fingerprint x : fa) {
      if (x.seq() > upTo) {
        break;
      }
      for (Fingerprint y : fb) {
        if (y.seq() == x.seq()) {
          String m = Fingerprint.mismatch(x.forTransfer().withSeq(x.seq()), a, y.forTransfer().withSeq(y.seq()), b);
          if (m != null) {
            return m;
          }
        }
      }
    }
    return null;
  }

  @Override
  public void close() {
    closed = true;
    checker.interrupt();
  }

  /**
   * Stops the checker and waits for it, up to a few periods: true once it is over, so that nothing of this rank
   * writes the digests' keys any more ({@link #keys}); false when it is still inside a store call.
   */
  boolean stop() {
    close();
    try {
      checker.join(4 * PERIOD.toMillis());
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    return !checker.isAlive();
  }

  /** Every key the digests of a group of {@code size} ranks may write in its store. */
  static List<String> keys(int size) {
    List<String> keys = new ArrayList<>(List.of(MISMATCH, PREFIX + "finders"));
    for (int r = 0; r < size; r++) {
      keys.add(PREFIX + r);
      keys.add(PREFIX + "fields/" + r);
    }
    return keys;
  }
}
