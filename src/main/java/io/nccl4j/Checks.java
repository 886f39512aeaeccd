package io.nccl4j;

import java.util.Arrays;
import java.util.Objects;

/**
 * Argument checks shared by every backend, with PyTorch ProcessGroupNCCL's messages (docs/SEMANTICS.md
 * §3) followed by the actual numbers. Every check runs on the calling rank before anything is
 * enqueued or sent, and throws {@link UsageException} (or {@link IllegalStateException} for a
 * closed tensor).
 */
public final class Checks {
  private final int rank;
  private final int worldSize;
  private final Device device;

  /**
   * @param rank the calling rank
   * @param worldSize number of ranks in the group
   * @param device the device every tensor must live on (cpu for the CPU backend, cuda:N for NCCL)
   */
  public Checks(int rank, int worldSize, Device device) {
    if (worldSize < 1 || rank < 0 || rank >= worldSize) {
      throw new IllegalArgumentException("rank " + rank + " is outside a group of size " + worldSize);
    }
    this.rank = rank;
    this.worldSize = worldSize;
    this.device = Objects.requireNonNull(device, "device");
  }

  /** AllReduce: in place when {@code output == input}. */
  public void allReduce(Tensor output, Tensor input, ReduceOp op) {
    tensor(input, "input");
    tensor(output, "output");
    reduceOp(op, input.dtype());
    if (output.dtype() != input.dtype()) {
      throw new UsageException("Tensors must have identical type",
          "input: " + input.dtype() + ", output: " + output.dtype());
    }
    if (output.count() != input.count()) {
      throw new UsageException("Tensors must have identical size",
          "input: " + input.count() + " elements, output: " + output.count() + " elements");
    }
    if (output != input && output.overlaps(input) && output.address() != input.address()) {
      throw new UsageException("Tensors must be non-overlapping and dense",
          "output overlaps input but is not the same buffer: output " + position(output, input, "input")
              + "; in-place AllReduce passes one tensor");
    }
  }

  /** reduce_scatter_tensor: input has worldSize × output elements; in place iff output is block {@code rank} of input. */
  public void reduceScatter(Tensor output, Tensor input, ReduceOp op) {
    tensor(input, "input");
    tensor(output, "output");
    reduceOp(op, input.dtype());
    if (input.dtype() != output.dtype()) {
      throw new UsageException("input tensor must be the same type as the output tensor.",
          "input: " + input.dtype() + ", output: " + output.dtype());
    }
    String sizes = "input tensor must be the same size as output size times world size";
    if (input.count() != timesWorld(output, "output", sizes)) {
      throw new UsageException(sizes,
          "input: " + input.count() + " elements, output: " + output.count() + " elements × world size "
              + worldSize + " = " + output.count() * worldSize);
    }
    inPlaceOffset(output, input, "output", "input", "reduce-scatter needs recvbuff == sendbuff + rank·recvcount");
  }

  /** all_gather_into_tensor: output has worldSize × input elements; in place iff input is block {@code rank} of output. */
  public void allGather(Tensor output, Tensor input) {
    tensor(input, "input");
    tensor(output, "output");
    if (input.dtype() != output.dtype()) {
      throw new UsageException("output tensor must have the same type as input tensor",
          "input: " + input.dtype() + ", output: " + output.dtype());
    }
    if (timesWorld(input, "input", "output tensor size must be equal to world_size times input tensor size")
        != output.count()) {
      throw new UsageException("output tensor size must be equal to world_size times input tensor size",
          "input: " + input.count() + " elements × world size " + worldSize + " = "
              + input.count() * worldSize + ", output: " + output.count() + " elements");
    }
    inPlaceOffset(input, output, "input", "output", "all-gather needs sendbuff == recvbuff + rank·sendcount");
  }

  /**
   * Broadcast: {@code tensor} is an open tensor on this group's device and {@code root} a rank of the
   * group, 0 … worldSize − 1.
   */
  public void broadcast(Tensor tensor, int root) {
    tensor(tensor, "tensor");
    rootRank(root);
  }

  /**
   * Reduce: as {@link #broadcast}, and {@code op} is allowed for the tensor's dtype
   * ({@link #reduceOp(ReduceOp, DType)}).
   */
  public void reduce(Tensor tensor, int root, ReduceOp op) {
    tensor(tensor, "tensor");
    rootRank(root);
    reduceOp(op, tensor.dtype());
  }

  /**
   * all_to_all_single. Empty splits mean equal split. Returns the element counts per peer,
   * {@code [inputSplits, outputSplits]}, resolved.
   */
  public long[][] allToAll(Tensor output, Tensor input, long[] outputSplits, long[] inputSplits) {
    tensor(input, "input");
    tensor(output, "output");
    if (input.dtype() != output.dtype()) {
      throw new UsageException("Tensors must have identical type",
          "input: " + input.dtype() + ", output: " + output.dtype());
    }
    long[] in = splits(inputSplits, input, "input");
    long[] out = splits(outputSplits, output, "output");
    if (isEmpty(inputSplits) && isEmpty(outputSplits) && input.count() != output.count()) {
      throw new UsageException("Tensors are not equal in size or data type",
          "equal split needs input and output of the same size; input: " + input.count()
              + " elements, output: " + output.count() + " elements");
    }
    if (in[rank] != out[rank]) {
      throw new UsageException("Split sizes doesn't match total dim 0 size",
          "rank " + rank + " sends " + in[rank] + " elements to itself but its output split for itself is "
              + out[rank]);
    }
    if (output.overlaps(input)) {
      throw new UsageException("Tensors must be non-overlapping and dense",
          "all_to_all_single cannot run in place: output overlaps input (output " + position(output, input, "input")
              + "); expected disjoint buffers");
    }
    return new long[][] {in, out};
  }

  /**
   * gather into one tensor: {@code output} (size × input elements, rank-major) on the root only,
   * null elsewhere; in place when {@code input} is block {@code root} of it.
   */
  public void gather(Tensor input, Tensor output, int root) {
    tensor(input, "input");
    rootRank(root, "ProcessGroupNCCL::gather: ");
    if (rank != root) {
      notOnNonRoot(output, "Argument ``gather_list`` must NOT be specified on non-destination ranks.", root);
      return;
    }
    onRoot(output, "Argument ``gather_list`` must be specified on destination rank.", input.count());
    allGather(output, input);
  }

  /**
   * scatter from one tensor: {@code input} (size × output elements, rank-major) on the root only,
   * null elsewhere; in place when {@code output} is block {@code root} of it.
   */
  public void scatter(Tensor output, Tensor input, int root) {
    tensor(output, "output");
    rootRank(root, "ProcessGroupNCCL::scatter: ");
    if (rank != root) {
      notOnNonRoot(input, "Argument ``scatter_list`` must NOT be specified on non-source ranks.", root);
      return;
    }
    onRoot(input, "Argument ``scatter_list`` must be specified on source rank.", output.count());
    tensor(input, "input");
    if (input.dtype() != output.dtype()) {
      throw new UsageException("input tensor must be the same type as the output tensor.",
          "input: " + input.dtype() + ", output: " + output.dtype());
    }
    String sizes = "input tensor must be the same size as output size times world size";
    if (input.count() != timesWorld(output, "output", sizes)) {
      throw new UsageException(sizes, "input: " + input.count() + " elements, output: " + output.count()
          + " elements × world size " + worldSize + " = " + output.count() * worldSize);
    }
    inPlaceOffset(output, input, "output", "input", "scatter in place needs recvbuff == sendbuff + root·recvcount");
  }

  private void notOnNonRoot(Tensor t, String message, int root) {
    if (t != null) {
      throw new UsageException(message, "rank " + rank + " is not the root (rank " + root + "); expected null, got "
          + t.describe());
    }
  }

  private void onRoot(Tensor t, String message, long perRank) {
    if (t == null) {
      throw new UsageException(message, "rank " + rank + " is the root; expected a tensor of world size "
          + worldSize + " × " + perRank + " elements, got null");
    }
  }

  /**
   * Send: {@code tensor} is an open tensor on this group's device and {@code dst} a rank of the group
   * other than this one.
   */
  public void send(Tensor tensor, int dst) {
    tensor(tensor, "tensor");
    peer(dst, "destination");
  }

  /**
   * Receive: {@code tensor} is an open tensor on this group's device and {@code src} a rank of the
   * group other than this one.
   */
  public void recv(Tensor tensor, int src) {
    tensor(tensor, "tensor");
    peer(src, "source");
  }

  /**
   * The operator is one NCCL has, and is allowed for {@code dtype}.
   */
  public static void reduceOp(ReduceOp op, DType dtype) {
    if (op == null) {
      throw new UsageException("Expected a ReduceOp", "got null");
    }
    if (op.isBitwise()) {
      throw new UsageException("Cannot use ReduceOp." + op.kind() + " with NCCL");
    }
    // PyTorch's NCCL backend has PreMulSum for these four types only (not float8, which NCCL itself
    // would premultiply; AVG on float8 is fine: NCCL does it).
    if (op.kind() == ReduceOp.Kind.PREMUL_SUM && (!dtype.isFloatingPoint() || dtype.isFloat8())) {
      throw new UsageException("PreMulSum Data type must be half, float, bfloat16 or double", "got " + dtype);
    }
  }

  /** The calling rank these checks were made for, 0 … worldSize − 1. */
  public int rank() {
    return rank;
  }

  /** The number of ranks in the group. */
  public int worldSize() {
    return worldSize;
  }

  /** The tensor is open and on this group's device (for {@link ListChecks} too). */
  void tensor(Tensor t, String name) {
    if (t == null) {
      throw new UsageException("Expected a tensor for '" + name + "'", "got null");
    }
    t.ensureOpen();
    if (!t.device().equals(device)) {
      if (device.isCuda() && !t.device().isCuda()) {
        throw new UsageException("Tensors must be CUDA and dense", name + " is on " + t.device());
      }
      if (device.isCpu() && !t.device().isCpu()) {
        throw new UsageException("Tensors must be CPU and dense", name + " is on " + t.device()
            + "; the CPU backend works on host memory");
      }
      throw new UsageException("Tensor found on device " + t.device() + " but backend constrained to " + device,
          name + " is on " + t.device());
    }
  }

  private void rootRank(int root) {
    rootRank(root, "");
  }

  /** PyTorch's assertRootRank, its message after {@code prefix} (the backend's, as ProcessGroupNCCL::gather's). */
  void rootRank(int root, String prefix) {
    if (root < 0 || root >= worldSize) {
      throw new UsageException(prefix + "invalid root rank: " + root, "valid ranks are 0.." + (worldSize - 1));
    }
  }

  private void peer(int peer, String role) {
    if (peer < 0 || peer >= worldSize) {
      throw new UsageException("Invalid " + role + " rank: " + peer, "valid ranks are 0.." + (worldSize - 1));
    }
    if (peer == rank) {
      String cap = role.substring(0, 1).toUpperCase(java.util.Locale.ROOT) + role.substring(1);
      throw new UsageException("Invalid " + role + " rank: " + role + " rank should not be the same as the rank"
          + " of the current process.", cap + " and current rank are both " + rank);
    }
  }

  /**
   * {@code t.count() × worldSize}; a product that does not fit in a long (a wrapped tensor with a
   * false count) would wrap and could match the other tensor's count, so it is refused.
   */
  private long timesWorld(Tensor t, String name, String torchMessage) {
    if (t.count() > Long.MAX_VALUE / worldSize) {
      throw new UsageException(torchMessage, name + ": " + t.count() + " elements × world size " + worldSize
          + " is more than " + Long.MAX_VALUE);
    }
    return t.count() * worldSize;
  }

  private void inPlaceOffset(Tensor part, Tensor whole, String partName, String wholeName, String rule) {
    if (!part.overlaps(whole)) {
      return;
    }
    long expected = whole.address() + (long) rank * part.count() * part.dtype().size();
    if (part.address() != expected) {
      throw new UsageException("Tensors must be non-overlapping and dense",
          partName + " overlaps " + wholeName + " but is not block " + rank + " of it: expected it to start at"
              + " element " + (long) rank * part.count() + " of " + wholeName + ", but it " + position(part, whole,
              wholeName) + " (" + rule + ")");
    }
  }

  /** Where {@code a} starts relative to {@code b} (same dtype), in elements: "starts at element 3 of input". */
  private static String position(Tensor a, Tensor b, String bName) {
    long bytes = a.address() - b.address();
    int es = a.dtype().size();
    if (bytes % es != 0) {
      return "starts " + Math.abs(bytes) + " bytes " + (bytes < 0 ? "before " : "into ") + bName;
    }
    long elements = bytes / es;
    return elements >= 0 ? "starts at element " + elements + " of " + bName
        : "starts " + -elements + (elements == -1 ? " element" : " elements") + " before " + bName;
  }

  private long[] splits(long[] given, Tensor t, String name) {
    if (isEmpty(given)) {
      if (t.count() % worldSize != 0) {
        throw new UsageException("Tensor's dim 0 does not divide equally across group size",
            name + " has " + t.count() + " elements, group size " + worldSize);
      }
      long[] eq = new long[worldSize];
      Arrays.fill(eq, t.count() / worldSize);
      return eq;
    }
    if (given.length != worldSize) {
      throw new UsageException("Number of tensor splits not equal to group size",
          name + " splits: " + given.length + ", group size " + worldSize);
    }
    long sum = 0;
    for (int i = 0; i < given.length; i++) {
      if (given[i] < 0 || given[i] > t.count()) {
        throw new UsageException("Split sizes doesn't match total dim 0 size",
            name + " split " + i + " is " + given[i] + ", outside 0.." + t.count());
      }
      if (given[i] > Long.MAX_VALUE - sum) {
        throw new UsageException("Split sizes doesn't match total dim 0 size",
            name + " splits 0.." + i + " sum to more than " + Long.MAX_VALUE + ", " + name + " has " + t.count()
                + " elements");
      }
      sum += given[i];
    }
    if (sum != t.count()) {
      throw new UsageException("Split sizes doesn't match total dim 0 size",
          name + " splits sum to " + sum + ", " + name + " has " + t.count() + " elements");
    }
    return given.clone();
  }

  private static boolean isEmpty(long[] splits) {
    return splits == null || splits.length == 0;
  }
}
