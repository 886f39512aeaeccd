package io.nccl4j;

import java.util.ArrayList;
import java.util.List;

/**
 * The list and uneven forms of the collectives, built as PyTorch builds them from a group's own
 * operations: gather and scatter of lists and all-to-all of lists through a flat temporary and
 * copies; all-gather into a list through the flat all-gather and copies when every entry has the
 * same size, else as coalesced broadcasts (rank i broadcasts entry i); reduce-scatter from a list
 * through the flat reduce-scatter when even, else as coalesced reduces (entry i reduced to rank i);
 * batches of point-to-point operations as one coalesced group. Every check runs before the first
 * operation is issued, and the whole form is issued under the group's lock, so that no other
 * thread's operation lands between its parts. Temporaries come from the group's allocator and are
 * closed as soon as their operation no longer needs them (the group keeps memory alive while an
 * operation uses it).
 */
final class ListCollectives {
  private final ProcessGroup pg;
  private final ListChecks checks;

  ListCollectives(ProcessGroup pg, ListChecks checks) {
    this.pg = pg;
    this.checks = checks;
  }

  Work gather(Tensor tensor, List<Tensor> list, int root) {
    synchronized (pg) {
      ensureOpen();
      checks.gather(tensor, list, root);
      if (pg.rank() != root) {
        return pg.gatherIntoTensorAsync(null, tensor, root);
      }
      Tensor flat = pg.empty(pg.size() * tensor.count(), tensor.dtype());
      return followed(flat, () -> pg.gatherIntoTensorAsync(flat, tensor, root), () -> copyOut(flat, list));
    }
  }

  Work scatter(Tensor tensor, List<Tensor> list, int root) {
    synchronized (pg) {
      ensureOpen();
      checks.scatter(tensor, list, root);
      if (pg.rank() != root) {
        return pg.scatterTensorAsync(tensor, null, root);
      }
      try (Tensor flat = pg.empty(pg.size() * tensor.count(), tensor.dtype())) {
        copyIn(list, flat);
        return pg.scatterTensorAsync(tensor, flat, root);
      }
    }
  }

  Work allGather(List<Tensor> outputs, Tensor input) {
    synchronized (pg) {
      ensureOpen();
      if (checks.allGather(outputs, input)) {
        Tensor flat = pg.empty(pg.size() * input.count(), input.dtype());
        return followed(flat, () -> pg.allGatherIntoTensorAsync(flat, input), () -> copyOut(flat, outputs));
      }
      Tensor mine = outputs.get(pg.rank());
      if (mine.address() != input.address()) {
        mine.copyFrom(input);
      }
      ProcessGroup.Coalesced group = pg.coalesce();
      try {
        for (int i = 0; i < outputs.size(); i++) {
          pg.broadcastAsync(outputs.get(i), i);
        }
      } finally {
        group.close();
      }
      return group.work();
    }
  }

  Work reduceScatter(Tensor output, List<Tensor> inputs, ReduceOp op) {
    synchronized (pg) {
      ensureOpen();
      if (checks.reduceScatter(output, inputs, op)) {
        try (Tensor flat = pg.empty(pg.size() * output.count(), output.dtype())) {
          copyIn(inputs, flat);
          return pg.reduceScatterTensorAsync(output, flat, op);
        }
      }
      Tensor mine = inputs.get(pg.rank());
      if (mine.address() != output.address()) {
        // Reduce is in place on the root; the caller's input must stay as it was.
        output.copyFrom(mine);
      }
      ProcessGroup.Coalesced group = pg.coalesce();
      try {
        for (int i = 0; i < inputs.size(); i++) {
          pg.reduceAsync(i == pg.rank() ? output : inputs.get(i), i, op);
        }
      } finally {
        group.close();
      }
      return group.work();
    }
  }

  Work allToAll(List<Tensor> outputs, List<Tensor> inputs) {
    synchronized (pg) {
      ensureOpen();
      long[][] splits = checks.allToAll(outputs, inputs);
      DType dtype = inputs.get(0).dtype();
      Tensor flatOut = pg.empty(sum(splits[1]), dtype);
      return followed(flatOut, () -> {
        try (Tensor flatIn = pg.empty(sum(splits[0]), dtype)) {
          copyIn(inputs, flatIn);
          return pg.allToAllSingleAsync(flatOut, flatIn, splits[1], splits[0]);
        }
      }, () -> copyOut(flatOut, outputs));
    }
  }

  List<Work> batch(List<P2POp> ops) {
    synchronized (pg) {
      ensureOpen();
      checks.batch(ops);
      List<Work> works = new ArrayList<>(ops.size());
      if (ops.isEmpty()) {
        return works;
      }
      ProcessGroup.Coalesced group = pg.coalesce();
      try {
        for (P2POp o : ops) {
          works.add(o.op() == P2POp.Op.ISEND ? pg.sendAsync(o.tensor(), o.peer()) : pg.recvAsync(o.tensor(), o.peer()));
        }
      } finally {
        group.close();
      }
      return works;
    }
  }

  private void ensureOpen() {
    if (pg.isClosed()) {
      throw new IllegalStateException(pg + " is closed");
    }
  }

  /** Issues the collective writing {@code temp}, whose Work completes once {@code copy} has read it. */
  private Work followed(Tensor temp, java.util.function.Supplier<Work> issue, Runnable copy) {
    Work w;
    try {
      w = issue.get();
    } catch (RuntimeException e) {
      temp.close();
      throw e;
    }
    return new FollowedWork(w, pg.timeout(), copy, temp::close);
  }

  /** The entries of {@code list}, one after another, into {@code flat}. */
  private static void copyIn(List<Tensor> list, Tensor flat) {
    long at = 0;
    for (Tensor t : list) {
      flat.slice(at, t.count()).copyFrom(t);
      at += t.count();
    }
  }

  /** Consecutive parts of {@code flat} into the entries of {@code list}. */
  private static void copyOut(Tensor flat, List<Tensor> list) {
    long at = 0;
    for (Tensor t : list) {
      t.copyFrom(flat.slice(at, t.count()));
      at += t.count();
    }
  }

  private static long sum(long[] counts) {
    long s = 0;
    for (long c : counts) {
      s += c;
    }
    return s;
  }
}
