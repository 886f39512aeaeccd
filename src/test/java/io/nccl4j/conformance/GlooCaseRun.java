package io.nccl4j.conformance;

import io.nccl4j.DType;
import io.nccl4j.ProcessGroup;
import io.nccl4j.ReduceOp;
import io.nccl4j.Tensor;
import io.nccl4j.memory.NativeMemory;
import io.nccl4j.testing.GlooCaseFile.Case;
import java.io.ByteArrayOutputStream;
import java.util.ArrayList;
import java.util.List;

/**
 * nccl4j's side of a {@link Case} of GlooOracleTest: the collective on a rank's group, with the tensors the oracle's
 * LibtorchGloo gives gloo (the list forms of gather and scatter, the tensor forms of the others), from and to the
 * case's bytes.
 */
final class GlooCaseRun {
  /** What an output holds before the collective writes it (as the oracle's), so that a skipped element shows. */
  private static final byte UNWRITTEN = 0x5A;

  private GlooCaseRun() {}

  /** Runs case {@code c} on this rank as gloo's oracle does (LibtorchGloo); returns the output bytes. */
  static byte[] run(ProcessGroup pg, Case c) {
    DType t = DType.parse(c.dtype());
    int size = pg.size();
    int n = c.count();
    boolean root = pg.rank() == c.root();
    List<Tensor> owned = new ArrayList<>();
    try {
      Tensor in = own(owned, tensor(pg, t, c.inputs().get(pg.rank())));
      switch (c.collective()) {
        case "all_reduce":
          pg.allReduce(in, ReduceOp.parse(c.op()));
          return bytes(in);
        case "broadcast":
          pg.broadcast(in, c.root());
          return bytes(in);
        case "reduce":
          pg.reduce(in, c.root(), ReduceOp.parse(c.op()));
          return bytes(in);
        case "all_gather_into_tensor": {
          Tensor out = own(owned, unwritten(pg, t, (long) size * n));
          pg.allGatherIntoTensor(out, in);
          return bytes(out);
        }
        case "reduce_scatter_tensor": {
          Tensor out = own(owned, unwritten(pg, t, n));
          pg.reduceScatterTensor(out, in, ReduceOp.parse(c.op()));
          return bytes(out);
        }
        case "all_to_all_single": {
          Tensor out = own(owned, unwritten(pg, t, (long) size * n));
          pg.allToAllSingle(out, in);
          return bytes(out);
        }
        case "gather": {
          List<Tensor> outs = new ArrayList<>();
          for (int r = 0; r < size && root; r++) {
            outs.add(own(owned, unwritten(pg, t, n)));
          }
          pg.gather(in, outs, c.root());
          ByteArrayOutputStream b = new ByteArrayOutputStream();
          outs.forEach(o -> b.writeBytes(bytes(o)));
          return b.toByteArray();
        }
        case "scatter": {
          Tensor out = own(owned, unwritten(pg, t, n));
          List<Tensor> blocks = new ArrayList<>();
          for (int r = 0; r < size && root; r++) {
            blocks.add(in.slice((long) r * n, n));
          }
          pg.scatter(out, blocks, c.root());
          return bytes(out);
        }
        default:
          throw new IllegalArgumentException(c.name() + ": expected a collective of GlooCaseFile.Case, got '"
              + c.collective() + "'");
      }
    } finally {
      owned.forEach(Tensor::close);
    }
  }

  private static Tensor own(List<Tensor> owned, Tensor t) {
    owned.add(t);
    return t;
  }

  private static Tensor tensor(ProcessGroup pg, DType t, byte[] b) {
    Tensor x = pg.empty(b.length / t.size(), t);
    NativeMemory.copyFromArray(b, 0, x.address(), b.length);
    return x;
  }

  private static Tensor unwritten(ProcessGroup pg, DType t, long elements) {
    Tensor x = pg.empty(elements, t);
    NativeMemory.fill(x.address(), x.nbytes(), UNWRITTEN);
    return x;
  }

  private static byte[] bytes(Tensor x) {
    byte[] b = new byte[(int) x.nbytes()];
    NativeMemory.copyToArray(x.address(), b, 0, b.length);
    return b;
  }
}
