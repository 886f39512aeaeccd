package io.nccl4j.nccl;

import io.nccl4j.BackendException;
import io.nccl4j.DType;
import io.nccl4j.ReduceOp;
import io.nccl4j.Scalar;
import io.nccl4j.internal.bind.nccl.CudaApi;
import io.nccl4j.internal.bind.nccl.NcclApi;
import io.nccl4j.memory.NativeMemory;
import io.nccl4j.nccl.cuda.CudaCall;
import io.nccl4j.spi.Collective.Buffer;
import io.nccl4j.spi.Collective;

/**
 * How each {@link Collective} becomes NCCL calls on one communicator and stream: the mapping alone,
 * with the version gates it needs. Called by the thread that holds the communicator
 * ({@link Communicator#enter}); every method returns NCCL's result for the caller to check.
 */
final class NcclLaunch implements AutoCloseable {
  private final Nccl nccl;
  private final NcclApi api;
  private final CudaApi cuda;
  private final Communicator comm;
  private final int device;
  /**
   * 8 bytes of host memory for PreMulSum's host-immediate scalar, for the backend's life: an
   * argument NCCL reads during the call, not working memory that grows with the data, so it is not
   * a ScratchBuffer (whose accounting would show a constant 8 bytes per rank); freed by close.
   */
  private final long scalarBuffer;
  private final int[] intOut = new int[1];
  /**
   * One element of device memory for barrier's all-reduce; allocated on first use, freed by close.
   * Like the scalar above, a fixed argument rather than working memory, so not counted.
   */
  private long barrierBuffer;

  NcclLaunch(Communicator comm) {
    this.comm = comm;
    this.nccl = comm.nccl();
    this.api = nccl.api();
    this.cuda = nccl.cuda();
    this.device = comm.deviceIndex();
    this.scalarBuffer = NativeMemory.allocate(8);
  }

  /**
   * Refuses, before anything is enqueued, what the loaded NCCL or the binding cannot do: a refused
   * operation has no effect at all.
   */
  void requireSupported(Collective c) {
    boolean sendRecv = switch (c.op()) {
      case SEND, RECV, ALLTOALL -> true;
      case GATHER, SCATTER -> !nativeRooted(c);
      case ALLREDUCE, REDUCE_SCATTER, ALLGATHER, BROADCAST, REDUCE, BARRIER, COALESCED -> false;
    };
    if (sendRecv) {
      nccl.require(NcclFeature.SEND_RECV);
    }
    if (c.input() != null && c.input().dtype().isFloat8()) {
      nccl.require(NcclFeature.FP8);
      if (comm.size() == 1 && c.reduceOp() != null && c.reduceOp().kind() == ReduceOp.Kind.PREMUL_SUM) {
        // The API refuses it first (PyTorch has no float8 PreMulSum); this is for direct users of the backend.
        throw new UnsupportedOperationException(c.input().dtype().torchName() + " " + c.reduceOp()
            + " at world size 1: NCCL's one-rank path has no float8 kernel (src/device/onerank.cu compiles its"
            + " float8 cases for sm_90 device code only, so NCCL answers ncclInvalidArgument); nccl4j does not call it");
      }
    }
    if (c.reduceOp() != null) {
      if (c.reduceOp().kind() == ReduceOp.Kind.AVG) {
        nccl.require(NcclFeature.AVG);
      } else if (c.reduceOp().kind() == ReduceOp.Kind.PREMUL_SUM) {
        nccl.require(NcclFeature.PREMUL_SUM);
      }
    }
  }

  /** The NCCL function that {@code c} calls, for messages. */
  String function(Collective c) {
    return switch (c.op()) {
      case ALLREDUCE -> "ncclAllReduce";
      case REDUCE_SCATTER -> "ncclReduceScatter";
      case ALLGATHER -> "ncclAllGather";
      case BROADCAST -> "ncclBroadcast";
      case REDUCE -> "ncclReduce";
      case ALLTOALL -> nativeAllToAll(c) ? "ncclAlltoAll" : "ncclGroupEnd (all-to-all)";
      case GATHER -> nativeRooted(c) ? "ncclGather" : "ncclGroupEnd (gather)";
      case SCATTER -> nativeRooted(c) ? "ncclScatter" : "ncclGroupEnd (scatter)";
      case SEND -> "ncclSend";
      case RECV -> "ncclRecv";
      case BARRIER -> "ncclAllReduce (barrier)";
      case COALESCED -> "ncclGroupEnd";
    };
  }

  /** Enqueues the NCCL call(s) for {@code c} on {@code stream} of communicator {@code h}. */
  int enqueue(Collective c, long h, long stream) {
    Buffer in = c.input();
    Buffer out = c.output();
    return switch (c.op()) {
      case ALLREDUCE -> {
        int op = ncclOp(c.reduceOp(), in.dtype(), h);
        yield reduced(c.reduceOp(), op, h,
            api.allReduce(in.address(), out.address(), in.count(), in.dtype().ncclCode(), op, h, stream));
      }
      case REDUCE_SCATTER -> {
        int op = ncclOp(c.reduceOp(), in.dtype(), h);
        yield reduced(c.reduceOp(), op, h,
            api.reduceScatter(in.address(), out.address(), out.count(), in.dtype().ncclCode(), op, h, stream));
      }
      case ALLGATHER -> api.allGather(in.address(), out.address(), in.count(), in.dtype().ncclCode(), h, stream);
      case BROADCAST -> api.broadcast(in.address(), in.address(), in.count(), in.dtype().ncclCode(), c.peer(), h,
          stream);
      case REDUCE -> {
        int op = ncclOp(c.reduceOp(), in.dtype(), h);
        yield reduced(c.reduceOp(), op, h,
            api.reduce(in.address(), in.address(), in.count(), in.dtype().ncclCode(), op, c.peer(), h, stream));
      }
      case ALLTOALL -> nativeAllToAll(c)
          ? api.alltoAll(in.address(), out.address(), c.inputSplits()[0], in.dtype().ncclCode(), h, stream)
          : groupedAllToAll(c, h, stream);
      case GATHER -> nativeRooted(c)
          ? api.gather(in.address(), out == null ? 0 : out.address(), in.count(), in.dtype().ncclCode(), c.peer(), h,
              stream)
          : groupedRooted(c, h, stream);
      case SCATTER -> nativeRooted(c)
          ? api.scatter(in == null ? 0 : in.address(), out.address(), out.count(), out.dtype().ncclCode(), c.peer(),
              h, stream)
          : groupedRooted(c, h, stream);
      case SEND -> api.send(in.address(), in.count(), in.dtype().ncclCode(), c.peer(), h, stream);
      case RECV -> api.recv(out.address(), out.count(), out.dtype().ncclCode(), c.peer(), h, stream);
      case BARRIER -> {
        // NCCL has no barrier; like PyTorch, all-reduce one element.
        if (barrierBuffer == 0) {
          long[] ptr = new long[1];
          CudaCall.check(cuda.malloc(ptr, 4), cuda, "cudaMalloc (barrier)", comm.device());
          barrierBuffer = ptr[0];
        }
        yield api.allReduce(barrierBuffer, barrierBuffer, 1, DType.INT32.ncclCode(), 0, h, stream);
      }
      // The op of a coalesced group's Work, never of an operation: submitGroup enqueues the group's own.
      case COALESCED -> throw new IllegalStateException("a COALESCED operation is a group's Work, not an operation");
    };
  }

  /**
   * ncclAlltoAll (NCCL ≥ 2.28) when every rank sends and receives the same number of elements to
   * and from every rank; otherwise grouped send/recv.
   */
  private boolean nativeAllToAll(Collective c) {
    long[] in = c.inputSplits();
    long[] out = c.outputSplits();
    if (!nccl.supports(NcclFeature.ALLTOALL) || in == null || out == null || in.length == 0) {
      return false;
    }
    for (int j = 0; j < in.length; j++) {
      if (in[j] != in[0] || out[j] != in[0]) {
        return false;
      }
    }
    return true;
  }

  /** ncclGather/ncclScatter where the loaded NCCL and the binding have them (≥ 2.28); grouped send/recv otherwise. */
  private boolean nativeRooted(Collective c) {
    return nccl.supports(c.op() == io.nccl4j.OpType.GATHER ? NcclFeature.GATHER : NcclFeature.SCATTER);
  }

  /**
   * Gather or scatter as PyTorch builds them without the native calls: in one group, the root
   * receives block r from (or sends it to) every rank r, its own block a send/recv to itself, and
   * every other rank sends to (or receives from) the root.
   */
  private int groupedRooted(Collective c, long h, long stream) {
    boolean gather = c.op() == io.nccl4j.OpType.GATHER;
    Buffer mine = gather ? c.input() : c.output();
    Buffer whole = gather ? c.output() : c.input();
    int root = c.peer();
    long count = mine.count();
    int dt = mine.dtype().ncclCode();
    long bytes = count * mine.dtype().size();
    int rc = api.groupStart();
    if (rc != 0) {
      return rc;
    }
    int first = 0;
    if (count > 0) {
      if (comm.rank() == root) {
        for (int r = 0; r < comm.size() && first == 0; r++) {
          long block = whole.address() + r * bytes;
          first = gather ? api.recv(block, count, dt, r, h, stream) : api.send(block, count, dt, r, h, stream);
        }
      }
      if (first == 0) {
        first = gather ? api.send(mine.address(), count, dt, root, h, stream)
            : api.recv(mine.address(), count, dt, root, h, stream);
      }
    }
    int end = api.groupEnd();
    return first != 0 ? first : end;
  }

  /** NCCL's operator for {@code op}: a PreMulSum operator is created here, and destroyed by {@link #reduced}. */
  private int ncclOp(ReduceOp op, DType dtype, long h) {
    if (op.kind() == ReduceOp.Kind.AVG && dtype.isFloat8() && comm.size() == 1) {
      // At one rank NCCL turns AVG on float8 into PreMulSum by 1 (hostToDevRedOp), and its one-rank
      // path has no float8 PreMulSum in the host pass (src/device/onerank.cu: the float8 cases sit under
      // __CUDA_ARCH__ >= 900): ncclInvalidArgument. x / 1 = x, which SUM — a copy at one rank — gives exactly.
      return ReduceOp.SUM.ncclCode();
    }
    if (op.kind() != ReduceOp.Kind.PREMUL_SUM) {
      return op.ncclCode();
    }
    writeScalar(dtype, op.scalar());
    int rc = api.redOpCreatePreMulSum(intOut, scalarBuffer, dtype.ncclCode(), h);
    if (rc != 0) {
      throw NcclCall.error(rc, api, comm.context(), "ncclRedOpCreatePreMulSum");
    }
    alive("ncclRedOpCreatePreMulSum");
    return intOut[0];
  }

  /** {@code rc}, the reducing call's result, once a PreMulSum operator is destroyed. */
  private int reduced(ReduceOp op, int ncclOp, long h, int rc) {
    if (op.kind() != ReduceOp.Kind.PREMUL_SUM) {
      return rc;
    }
    alive("ncclRedOpDestroy");
    // NCCL copies the operator into the enqueued work, so it can be destroyed right away.
    int drc = api.redOpDestroy(ncclOp, h);
    return rc != 0 ? rc : drc;
  }

  /** The scalar in the element type, as NCCL reads a host-immediate scalar. */
  private void writeScalar(DType dtype, double s) {
    double v = dtype == DType.FLOAT64 ? s : dtype.round((float) s);
    Scalar scalar = Scalar.of(dtype, v);
    NativeMemory.putLong(scalarBuffer, scalar.bits());
  }

  /** Grouped send/recv, one pair per peer; the block for itself is a send/recv to itself. */
  private int groupedAllToAll(Collective c, long h, long stream) {
    Buffer in = c.input();
    Buffer out = c.output();
    int es = in.dtype().size();
    int dt = in.dtype().ncclCode();
    int rc = api.groupStart();
    if (rc != 0) {
      return rc;
    }
    long inOff = 0;
    long outOff = 0;
    int first = 0;
    for (int j = 0; j < comm.size() && first == 0; j++) {
      long sc = c.inputSplits()[j];
      long rcnt = c.outputSplits()[j];
      if (sc > 0) {
        first = api.send(in.address() + inOff * es, sc, dt, j, h, stream);
      }
      if (first == 0 && rcnt > 0) {
        first = api.recv(out.address() + outOff * es, rcnt, dt, j, h, stream);
      }
      inOff += sc;
      outOff += rcnt;
    }
    int end = api.groupEnd();
    return first != 0 ? first : end;
  }

  /**
   * Between two NCCL calls of one launch: an abort that went ahead while the previous call was stuck
   * has freed the communicator, and nothing more may be called on it.
   */
  void alive(String next) {
    if (comm.isAborting()) {
      throw new BackendException("rank " + comm.rank() + ": the NCCL communicator was aborted; " + next
          + " was not called");
    }
  }

  /** Frees the barrier's device element and the scalar; the communicator is idle or gone. */
  @Override
  public void close() {
    try {
      if (barrierBuffer != 0) {
        int rc = cuda.free(barrierBuffer);
        barrierBuffer = 0;
        if (rc != CudaApi.SUCCESS) {
          org.slf4j.LoggerFactory.getLogger(NcclLaunch.class).warn("rank {}: cudaFree of the barrier buffer failed: {}",
              comm.rank(), cuda.getErrorName(rc));
        }
      }
    } finally {
      NativeMemory.free(scalarBuffer);
    }
  }
}
