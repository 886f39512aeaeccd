package io.nccl4j.testing;

import io.nccl4j.DType;
import io.nccl4j.Tensor;
import io.nccl4j.memory.Allocator;
import io.nccl4j.memory.MemoryResource;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Objects;
import java.util.function.Supplier;

/**
 * Inputs and expected results of the conformance suites, computed once per test JVM and handed out
 * as copies. The same (dtype, operator, world size, count) case runs on every runner — threads,
 * rings, TCP, shared memory, subgroups — and at a million elements the naive oracle (a hash per
 * element and rank, the reduction in rank order through the element type's rounding) cost several
 * times the collective it checks; a copy costs one memcpy. Callers get a tensor of their own, so
 * nothing they write can reach another case. Small tensors are not cached (they cost less than a
 * look-up is worth); the cache keeps the most recently used entries up to a byte budget
 * ({@code nccl4j.test.oracle.cache.mib}, 1024 by default), off the Java heap like every tensor.
 */
final class OracleCache {
  private OracleCache() {}

  /** Below this many bytes a tensor is computed each time. */
  private static final long MIN_BYTES = 16 << 10;
  private static final long BUDGET = Long.getLong("nccl4j.test.oracle.cache.mib", 1024) << 20;

  /** What a cached tensor is: its kind of content and every parameter its values depend on. */
  static final class Key {
    private final String kind;
    private final DType dtype;
    private final String op;
    private final int p;
    private final int rank;
    private final long count;

    Key(String kind, DType dtype, String op, int p, int rank, long count) {
      this.kind = kind;
      this.dtype = dtype;
      this.op = op;
      this.p = p;
      this.rank = rank;
      this.count = count;
    }

    @Override
    public boolean equals(Object o) {
      if (!(o instanceof Key)) {
        return false;
      }
      Key k = (Key) o;
      return kind.equals(k.kind) && dtype == k.dtype && op.equals(k.op) && p == k.p && rank == k.rank
          && count == k.count;
    }

    @Override
    public int hashCode() {
      return Objects.hash(kind, dtype, op, p, rank, count);
    }
  }

  /**
   * The cache's own memory: not the process-wide host allocator, whose blocks a strict cluster counts
   * against the rank thread that allocated them (the thread that first asks is a rank's).
   */
  private static final Allocator MEMORY = Allocator.root("conformance-oracle-cache", MemoryResource.HOST);

  private static final LinkedHashMap<Key, Tensor> ENTRIES = new LinkedHashMap<>(64, 0.75f, true);
  private static long bytes;

  /** A copy of the tensor for {@code key}, computed by {@code make} (which hands over ownership) if absent. */
  static Tensor get(Key key, Supplier<Tensor> make) {
    if (key.count * key.dtype.size() < MIN_BYTES) {
      return make.get();
    }
    synchronized (ENTRIES) {
      Tensor cached = ENTRIES.get(key);
      if (cached == null) {
        try (Tensor made = make.get()) {
          cached = made.copy(MEMORY);
        }
        ENTRIES.put(key, cached);
        bytes += cached.nbytes();
        evict();
      }
      return cached.copy();
    }
  }

  /** Closes the least recently used entries while over budget (never the one just added). */
  private static void evict() {
    Iterator<Map.Entry<Key, Tensor>> it = ENTRIES.entrySet().iterator();
    while (bytes > BUDGET && ENTRIES.size() > 1 && it.hasNext()) {
      Tensor t = it.next().getValue();
      it.remove();
      bytes -= t.nbytes();
      t.close();
    }
  }
}
