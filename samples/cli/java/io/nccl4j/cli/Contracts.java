package io.nccl4j.cli;

import io.nccl4j.DType;
import io.nccl4j.Padding;
import io.nccl4j.ProcessGroup;
import io.nccl4j.ReduceOp;
import io.nccl4j.ShardLayout;
import io.nccl4j.Tensor;
import io.nccl4j.UsageException;
import java.util.ArrayList;
import java.util.List;

/**
 * The chapter's five exact contracts (docs/SEMANTICS.md §6.1), checked on one rank. int64 data so that
 * every result is exact: the contracts prove layout and operator, not rounding.
 */
final class Contracts {
  private Contracts() {}

  static final String EXACT = "exact-sum-equivalence";
  static final String ROLLED = "wrong-shard-order-rejected";
  static final String WRONG_OP = "wrong-reduction-op-rejected";
  static final String PADDING = "padding-and-trim-equivalence";
  static final String REJECTED = "nondivisible-without-padding-rejected";
  static final List<String> NAMES = List.of(EXACT, ROLLED, WRONG_OP, PADDING, REJECTED);

  enum Status {
    PASS,
    FAIL,
    SKIP
  }

  record Row(String contract, int rank, Status status, String detail) {}

  /** Runs every contract on this rank; collective (every rank must call it). */
  static List<Row> run(ProcessGroup pg, long count, long nondivisible) {
    List<Row> rows = new ArrayList<>();
    int p = pg.size();
    int r = pg.rank();
    try (Tensor base = rankEncoded(pg, count, 100);
         Tensor directOnDevice = base.copy(pg.allocator())) {
      pg.allReduce(directOnDevice, ReduceOp.SUM);
      try (Tensor direct = directOnDevice.copy();
           Tensor gathered = download(reduceScatterAllGather(pg, base, ReduceOp.SUM))) {
        // 1. direct == RS+AG == the independent formula p·i + 100·p(p−1)/2.
        try (Tensor formula = Tensor.empty(count, DType.INT64)) {
          for (long i = 0; i < count; i++) {
            formula.setLong(i, p * i + 100L * p * (p - 1) / 2);
          }
          Tensor trimmed = gathered.slice(0, count);
          boolean ok = direct.equal(trimmed) && trimmed.equal(formula);
          rows.add(new Row(EXACT, r, ok ? Status.PASS : Status.FAIL, ok
              ? "direct = RS+AG = " + p + "·i + " + 100L * p * (p - 1) / 2 + " for all " + count + " elements"
              : "direct vs RS+AG: " + trimmed.diff(direct, 0, 0) + "; RS+AG vs formula: " + trimmed.diff(formula, 0, 0)));
        }
        // 2. Rolling the rank-major blocks by one must break equality.
        if (p == 1) {
          rows.add(new Row(ROLLED, r, Status.SKIP, "world size 1 has one block; rolling it changes nothing"));
        } else {
          long q = gathered.count() / p;
          try (Tensor rolled = Tensor.empty(gathered.count(), DType.INT64)) {
            for (int b = 0; b < p; b++) {
              rolled.slice(((b + 1) % p) * q, q).copyFrom(gathered.slice(b * q, q));
            }
            boolean equal = rolled.slice(0, count).equal(direct);
            rows.add(new Row(ROLLED, r, equal ? Status.FAIL : Status.PASS, equal
                ? "rolled blocks still equal the direct result"
                : "rolled result differs from direct: " + rolled.slice(0, count).diff(direct, 0, 0)));
          }
        }
      }
      // 3. ReduceScatter(MAX) + AllGather must not equal AllReduce(SUM).
      if (p == 1) {
        rows.add(new Row(WRONG_OP, r, Status.SKIP, "with one rank, MAX and SUM of one contribution coincide"));
      } else {
        try (Tensor maxGathered = download(reduceScatterAllGather(pg, base, ReduceOp.MAX));
             Tensor direct = directOnDevice.copy()) {
          boolean equal = maxGathered.slice(0, count).equal(direct);
          rows.add(new Row(WRONG_OP, r, equal ? Status.FAIL : Status.PASS, equal
              ? "RS(MAX)+AG equals AllReduce(SUM)"
              : "RS(MAX)+AG differs from AllReduce(SUM): " + maxGathered.slice(0, count).diff(direct, 0, 0)));
        }
      }
    }
    rows.add(paddingContract(pg, nondivisible));
    rows.add(rejectionContract(pg, count, nondivisible));
    return rows;
  }

  /** Copies a tensor to the host and closes the original. */
  private static Tensor download(Tensor t) {
    try (t) {
      return t.copy();
    }
  }

  /** arange(count) + step·rank, int64, on the group's device. */
  private static Tensor rankEncoded(ProcessGroup pg, long count, long step) {
    Tensor host = Tensor.arange(0, count, DType.INT64);
    try (host) {
      for (long i = 0; i < count; i++) {
        host.setLong(i, i + step * pg.rank());
      }
      return host.copy(pg.allocator());
    }
  }

  /** RS then AG of {@code input}, padded with op's identity when it does not divide; padded result. */
  private static Tensor reduceScatterAllGather(ProcessGroup pg, Tensor input, ReduceOp op) {
    ShardLayout layout = new ShardLayout(input.count(), pg.size());
    try (Tensor padded = Padding.pad(input, layout, op, pg.allocator());
         Tensor shard = pg.empty(layout.shardSize(), DType.INT64)) {
      Tensor gathered = pg.empty(layout.paddedCount(), DType.INT64);
      try {
        pg.reduceScatterTensor(shard, padded, op);
        pg.allGatherIntoTensor(gathered, shard);
      } catch (RuntimeException e) {
        gathered.close();
        throw e;
      }
      return gathered;
    }
  }

  private static Row paddingContract(ProcessGroup pg, long n) {
    int r = pg.rank();
    ShardLayout layout = new ShardLayout(n, pg.size());
    try (Tensor logical = rankEncoded(pg, n, 1000);
         Tensor directOnDevice = logical.copy(pg.allocator())) {
      pg.allReduce(directOnDevice, ReduceOp.SUM);
      try (Tensor direct = directOnDevice.copy();
           Tensor gathered = download(reduceScatterAllGather(pg, logical, ReduceOp.SUM))) {
        boolean tailIsIdentity = true;
        for (long i = n; i < gathered.count(); i++) {
          tailIsIdentity &= gathered.getLong(i) == 0;
        }
        Tensor trimmed = gathered.slice(0, n);
        boolean ok = trimmed.equal(direct) && tailIsIdentity;
        String how = layout.isDivisible() ? n + " elements divide by " + pg.size() + " (no padding needed)"
            : n + " → padded " + layout.paddedCount() + " (q = " + layout.shardSize() + ", "
                + layout.paddingCount() + " identity element(s)), trimmed back to " + n;
        return new Row(PADDING, r, ok ? Status.PASS : Status.FAIL, ok ? how + "; equals direct AllReduce"
            : how + "; " + trimmed.diff(direct, 0, 0) + (tailIsIdentity ? "" : "; padding tail is not the identity"));
      }
    }
  }

  /** The first count that does not divide by p, or -1 when every candidate divides (p == 1). */
  static long nondivisibleCount(int p, long count, long nondivisible) {
    for (long c : new long[] {nondivisible, count, nondivisible + 1}) {
      if (c > 0 && c % p != 0) {
        return c;
      }
    }
    return -1;
  }

  private static Row rejectionContract(ProcessGroup pg, long count, long nondivisible) {
    int p = pg.size();
    int r = pg.rank();
    long n = nondivisibleCount(p, count, nondivisible);
    if (n < 0) {
      return new Row(REJECTED, r, Status.SKIP, "every count divides by world size " + p);
    }
    long outCount = n / p;
    try (Tensor input = rankEncoded(pg, n, 100);
         Tensor host = Tensor.full(outCount, DType.INT64, -1);
         Tensor output = host.copy(pg.allocator())) {
      long seqBefore = pg.sequenceNumber();
      try {
        pg.reduceScatterTensor(output, input, ReduceOp.SUM);
        return new Row(REJECTED, r, Status.FAIL, "reduce-scatter of " + n + " into " + outCount + " was accepted");
      } catch (UsageException e) {
        String expected = "input tensor must be the same size as output size times world size";
        boolean message = e.torchMessage().equals(expected);
        boolean untouched;
        try (Tensor after = output.copy()) {
          untouched = after.equal(host);
        }
        boolean nothingEnqueued = pg.sequenceNumber() == seqBefore;
        boolean ok = message && untouched && nothingEnqueued;
        return new Row(REJECTED, r, ok ? Status.PASS : Status.FAIL, ok
            ? "rejected before enqueue: \"" + e.getMessage() + "\""
            : "message: \"" + e.getMessage() + "\"" + (untouched ? "" : "; output was modified")
                + (nothingEnqueued ? "" : "; a collective was enqueued"));
      }
    }
  }
}
