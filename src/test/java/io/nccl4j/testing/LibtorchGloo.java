package io.nccl4j.testing;

import io.nccl4j.testing.GlooCaseFile.Case;
import io.nccl4j.testing.GlooCaseFile.Result;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.TreeSet;
import org.bytedeco.javacpp.BytePointer;
import org.bytedeco.javacpp.Pointer;
import org.bytedeco.javacpp.chrono.Milliseconds;
import org.bytedeco.pytorch.AllgatherOptions;
import org.bytedeco.pytorch.AllreduceOptions;
import org.bytedeco.pytorch.BroadcastOptions;
import org.bytedeco.pytorch.GatherOptions;
import org.bytedeco.pytorch.GlooDeviceVector;
import org.bytedeco.pytorch.LongVector;
import org.bytedeco.pytorch.PrefixStore;
import org.bytedeco.pytorch.ProcessGroupGloo;
import org.bytedeco.pytorch.ReduceOp;
import org.bytedeco.pytorch.ReduceOptions;
import org.bytedeco.pytorch.ReduceScatterOptions;
import org.bytedeco.pytorch.ScatterOptions;
import org.bytedeco.pytorch.TCPStore;
import org.bytedeco.pytorch.TCPStoreOptions;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorOptions;
import org.bytedeco.pytorch.TensorVector;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;

/**
 * ProcessGroupGloo, in the oracle's JVM, running a {@link GlooCaseFile} of cases: one group per world size, its
 * ranks as threads (each its own TCPStore client of one libtorch server, under a prefix per world size), every
 * case in the file's order on every rank, every rank's output bytes into the results file. A call gloo refuses is
 * recorded with its error, not thrown; the test decides.
 */
final class LibtorchGloo {
  /** Gloo's timeout for every call: a case that stalls fails in time instead of stalling the oracle. */
  private static final long TIMEOUT_MS = TestTime.scaledMillis(30, java.util.concurrent.TimeUnit.SECONDS);
  /** What an output holds before the collective writes it, so that an element it skips is seen, and seen alike. */
  private static final byte UNWRITTEN = 0x5A;

  private LibtorchGloo() {}

  static void run(Path casesFile, Path resultsFile) throws Exception {
    List<Case> cases = GlooCaseFile.readCases(casesFile);
    Result[][] results = new Result[cases.size()][];
    for (int i = 0; i < cases.size(); i++) {
      results[i] = new Result[cases.get(i).worldSize()];
    }
    TCPStoreOptions o = new TCPStoreOptions();
    o.port((short) 0);
    o.isServer(true);
    o.waitWorkers(false);
    o.timeout(new Milliseconds(TIMEOUT_MS));
    TCPStore server = new TCPStore("127.0.0.1", o);
    int port = server.getPort() & 0xffff;
    List<Thread> threads = new ArrayList<>();
    Throwable[] failure = new Throwable[1];
    for (int size : new TreeSet<>(cases.stream().map(Case::worldSize).toList())) {
      for (int r = 0; r < size; r++) {
        int rank = r;
        Thread t = new Thread(() -> {
          try {
            rank(port, size, rank, cases, results);
          } catch (Throwable e) {
            synchronized (failure) {
              failure[0] = failure[0] == null ? e : failure[0];
            }
            e.printStackTrace();
          }
        }, "gloo-w" + size + "-rank" + r);
        t.start();
        threads.add(t);
      }
    }
    for (Thread t : threads) {
      t.join();
    }
    if (failure[0] != null) {
      throw new IllegalStateException("a gloo rank failed outside its cases", failure[0]);
    }
    List<List<Result>> out = new ArrayList<>();
    for (Result[] r : results) {
      out.add(Arrays.asList(r));
    }
    GlooCaseFile.writeResults(resultsFile, out);
  }

  private static void rank(int port, int size, int rank, List<Case> cases, Result[][] results) {
    TCPStoreOptions o = new TCPStoreOptions();
    o.port((short) port);
    o.isServer(false);
    o.waitWorkers(false);
    o.timeout(new Milliseconds(TIMEOUT_MS));
    TCPStore client = new TCPStore("127.0.0.1", o);
    ProcessGroupGloo.Options options = ProcessGroupGloo.Options.create(new Milliseconds(TIMEOUT_MS));
    options.devices(new GlooDeviceVector(ProcessGroupGloo.createDeviceForHostname("127.0.0.1")));
    ProcessGroupGloo pg = new ProcessGroupGloo(new PrefixStore("gloo-w" + size, client), rank, size, options);
    for (int i = 0; i < cases.size(); i++) {
      Case c = cases.get(i);
      if (c.worldSize() != size) {
        continue;
      }
      try {
        results[i][rank] = new Result("ok", call(pg, c, rank));
      } catch (RuntimeException e) {
        String m = String.valueOf(e.getMessage());
        results[i][rank] = new Result("error: " + m.split("\n")[0], new byte[0]);
      }
    }
  }

  /** Runs case {@code c} on this rank; returns its output bytes (none for a gather's non-root). */
  private static byte[] call(ProcessGroupGloo pg, Case c, int rank) {
    ScalarType type = scalarType(c.dtype());
    byte[] in = c.inputs().get(rank);
    int n = c.count();
    int size = c.worldSize();
    boolean root = rank == c.root();
    switch (c.collective()) {
      case "all_reduce": {
        Tensor t = tensor(type, in);
        pg.allreduce(new TensorVector(t), new AllreduceOptions().reduceOp(op(c.op())))._wait();
        return bytes(t);
      }
      case "broadcast": {
        Tensor t = tensor(type, in);
        pg.broadcast(new TensorVector(t), new BroadcastOptions().rootRank(c.root()))._wait();
        return bytes(t);
      }
      case "reduce": {
        Tensor t = tensor(type, in);
        pg.reduce(new TensorVector(t), new ReduceOptions().rootRank(c.root()).reduceOp(op(c.op())))._wait();
        return bytes(t);
      }
      case "all_gather_into_tensor": {
        Tensor out = unwritten(type, (long) size * n);
        pg._allgather_base(out, tensor(type, in), new AllgatherOptions())._wait();
        return bytes(out);
      }
      case "reduce_scatter_tensor": {
        Tensor out = unwritten(type, n);
        pg._reduce_scatter_base(out, tensor(type, in), new ReduceScatterOptions().reduceOp(op(c.op())))._wait();
        return bytes(out);
      }
      case "all_to_all_single": {
        Tensor out = unwritten(type, (long) size * n);
        pg.alltoall_base(out, tensor(type, in), new LongVector(), new LongVector())._wait();
        return bytes(out);
      }
      case "gather": {
        // The root's outputs are one std::vector<std::vector<Tensor>> of one list; the others pass none.
        Tensor[] outs = new Tensor[size];
        for (int r = 0; r < size && root; r++) {
          outs[r] = unwritten(type, n);
        }
        TensorVector outputs = root ? new TensorVector(outs) : new TensorVector((Pointer) null);
        pg.gather(outputs, new TensorVector(tensor(type, in)), new GatherOptions().rootRank(c.root()))._wait();
        return root ? concat(outs) : new byte[0];
      }
      case "scatter": {
        Tensor out = unwritten(type, n);
        TensorVector inputs = new TensorVector((Pointer) null);
        if (root) {
          int block = in.length / size;
          Tensor[] blocks = new Tensor[size];
          for (int r = 0; r < size; r++) {
            blocks[r] = tensor(type, Arrays.copyOfRange(in, r * block, (r + 1) * block));
          }
          inputs = new TensorVector(blocks);
        }
        pg.scatter(new TensorVector(out), inputs, new ScatterOptions().rootRank(c.root()))._wait();
        return bytes(out);
      }
      default:
        throw new IllegalArgumentException(c.name() + ": expected a collective of GlooCaseFile.Case, got '"
            + c.collective() + "'");
    }
  }

  private static ScalarType scalarType(String dtype) {
    switch (dtype) {
      case "int8": return ScalarType.Char;
      case "uint8": return ScalarType.Byte;
      case "int32": return ScalarType.Int;
      case "int64": return ScalarType.Long;
      case "float16": return ScalarType.Half;
      case "bfloat16": return ScalarType.BFloat16;
      case "float32": return ScalarType.Float;
      case "float64": return ScalarType.Double;
      default: throw new IllegalArgumentException("expected a dtype of GlooCaseFile.Case, got '" + dtype + "'");
    }
  }

  private static ReduceOp op(String op) {
    switch (op) {
      case "sum": return new ReduceOp(ReduceOp.RedOpType.SUM);
      case "product": return new ReduceOp(ReduceOp.RedOpType.PRODUCT);
      case "min": return new ReduceOp(ReduceOp.RedOpType.MIN);
      case "max": return new ReduceOp(ReduceOp.RedOpType.MAX);
      case "avg": return new ReduceOp(ReduceOp.RedOpType.AVG);
      default: throw new IllegalArgumentException("expected an operator of GlooCaseFile.Case, got '" + op + "'");
    }
  }

  private static Tensor empty(ScalarType type, long elements) {
    return torch.empty(new long[] {elements}, new TensorOptions(type), null);
  }

  private static BytePointer memory(Tensor t) {
    return new BytePointer(t.data_ptr()).capacity(t.nbytes()).limit(t.nbytes());
  }

  private static Tensor tensor(ScalarType type, byte[] b) {
    Tensor t = empty(type, b.length / elementSize(type));
    memory(t).put(b, 0, b.length);
    return t;
  }

  private static Tensor unwritten(ScalarType type, long elements) {
    Tensor t = empty(type, elements);
    memory(t).fill(UNWRITTEN);
    return t;
  }

  private static long elementSize(ScalarType type) {
    return empty(type, 0).element_size();
  }

  private static byte[] bytes(Tensor t) {
    byte[] b = new byte[(int) t.nbytes()];
    memory(t).get(b, 0, b.length);
    return b;
  }

  private static byte[] concat(Tensor[] ts) {
    java.io.ByteArrayOutputStream out = new java.io.ByteArrayOutputStream();
    for (Tensor t : ts) {
      out.writeBytes(bytes(t));
    }
    return out.toByteArray();
  }
}
