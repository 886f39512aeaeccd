package io.nccl4j;

import java.util.List;

/**
 * The argument checks of the list forms (gather and scatter lists, all-gather into a list,
 * reduce-scatter from a list, all-to-all of lists, batches of point-to-point operations), with
 * PyTorch's messages, in the order a torch.distributed call meets them: torch.distributed's Python
 * checks first (the dtypes of every list), then ProcessGroupNCCL's, and ProcessGroupGloo's list-length
 * messages where ProcessGroupNCCL checks no length.
 * Each runs on the calling rank before anything is enqueued and throws {@link UsageException};
 * the tensor checks themselves are {@link Checks}'.
 */
final class ListChecks {
  private final Checks checks;
  private final int rank;
  private final int worldSize;

  ListChecks(Checks checks) {
    this.checks = checks;
    this.rank = checks.rank();
    this.worldSize = checks.worldSize();
  }

  /** gather into a list: on the root {@code list} holds size tensors each like {@code input}; elsewhere null or empty. */
  void gather(Tensor input, List<Tensor> list, int root) {
    checks.tensor(input, "input");
    listDtypes(input, list, "gather_list");
    rooted(list, root, "gather", "output", "gather_list", "destination", input);
  }

  /**
   * scatter_object_list on the source: as a scatter list, checked before the first of its
   * collectives so that a wrong list fails on the source alone, not after its peers went ahead.
   */
  void scatterObjects(List<?> objects, int root) {
    rooted(objects, root, "scatter", "input", "scatter_list", "source", null);
  }

  /** scatter from a list: as {@link #gather}, each entry like {@code output}. */
  void scatter(Tensor output, List<Tensor> list, int root) {
    checks.tensor(output, "output");
    listDtypes(output, list, "scatter_list");
    rooted(list, root, "scatter", "input", "scatter_list", "source", output);
  }

  /**
   * What torch.distributed's gather and scatter check in Python before anything else, on every rank and before the
   * root is looked at: the list's entries are tensors ({@code _check_tensor_list}) of {@code tensor}'s dtype
   * ({@code _ensure_all_tensors_same_dtype(tensor, list)}, {@code tensor} first).
   */
  private void listDtypes(Tensor tensor, List<Tensor> list, String arg) {
    if (list == null || list.isEmpty()) {
      return;
    }
    for (int i = 0; i < list.size(); i++) {
      checks.tensor(list.get(i), arg + "[" + i + "]");
    }
    sameDtype(list, tensor, true);
  }

  /**
   * all_gather into a list: size tensors of {@code input}'s dtype; entry {@code rank} as long as
   * {@code input}. Returns true when every entry has the same size (the flat path).
   */
  boolean allGather(List<Tensor> outputs, Tensor input) {
    checks.tensor(input, "input");
    length(outputs, "ProcessGroupGloo::allgather: invalid output tensor list at index 0", "tensor_list");
    sameDtype(outputs, input, false);
    boolean even = sameSizes(outputs);
    long mine = outputs.get(rank).count();
    if (mine != input.count()) {
      throw new UsageException(even ? "output tensor size must be equal to world_size times input tensor size"
          : "Tensor input and output of _broadcast_oop must have the same number of elements ",
          "rank " + rank + ": input has " + input.count() + " elements, tensor_list[" + rank + "] has " + mine);
    }
    return even;
  }

  /**
   * reduce_scatter from a list: size tensors of {@code output}'s dtype; entry {@code rank} as long
   * as {@code output}. Returns true when every entry has the same size (the flat path).
   */
  boolean reduceScatter(Tensor output, List<Tensor> inputs, ReduceOp op) {
    checks.tensor(output, "output");
    int n = inputs == null ? 0 : inputs.size();
    if (n != worldSize) {
      // ProcessGroupGloo's text (torch 2.13); ProcessGroupNCCL checks no length.
      throw new UsageException("invalid input tensor list size, must be world size",
          "rank " + rank + ": input_list has " + n + " tensors, expected " + worldSize + ", one per rank");
    }
    for (int i = 0; i < n; i++) {
      checks.tensor(inputs.get(i), "input_list[" + i + "]");
    }
    sameDtype(inputs, output, true);
    Checks.reduceOp(op, output.dtype());
    boolean even = sameSizes(inputs);
    long mine = inputs.get(rank).count();
    if (mine != output.count()) {
      throw new UsageException(even ? "input tensor must be the same size as output size times world size"
          : "Tensor input and output of _reduce_oop must have the same number of elements ",
          "rank " + rank + ": output has " + output.count() + " elements, input_list[" + rank + "] has " + mine);
    }
    return even;
  }

  /**
   * all_to_all of lists: size tensors each, all of one dtype. Returns the element counts,
   * {@code [inputSplits, outputSplits]}, for {@link Checks#allToAll}.
   */
  long[][] allToAll(List<Tensor> outputs, List<Tensor> inputs) {
    long[] out = splits(outputs, "output_tensor_list");
    long[] in = splits(inputs, "input_tensor_list");
    sameDtype(outputs, inputs.get(0), false);
    sameDtype(inputs, outputs.get(0), false);
    return new long[][] {in, out};
  }

  /**
   * batch_isend_irecv: a list of operations, none null, each a valid send or receive — all checked
   * before the first is enqueued, so that a mistake leaves no partial group behind.
   */
  void batch(List<P2POp> ops) {
    boolean anyNull = ops == null;
    for (int i = 0; !anyNull && i < ops.size(); i++) {
      anyNull = ops.get(i) == null; // not contains(null): immutable lists throw on it
    }
    if (anyNull) {
      throw new UsageException("Invalid ``p2p_op_list``. Each op is expected to to be of type"
          + " ``torch.distributed.P2POp``.", "rank " + rank + ": got " + (ops == null ? "null" : "a null op"));
    }
    for (P2POp o : ops) {
      if (o.op() == P2POp.Op.ISEND) {
        checks.send(o.tensor(), o.peer());
      } else {
        checks.recv(o.tensor(), o.peer());
      }
    }
  }

  /** {@code like} null: the entries are not tensors, and only the list's presence and length are checked. */
  private void rooted(List<?> list, int root, String op, String side, String arg, String role, Tensor like) {
    String prefix = "ProcessGroupNCCL::" + op + ": ";
    checks.rootRank(root, prefix);
    boolean given = list != null && !list.isEmpty();
    if (rank != root) {
      if (given) {
        throw new UsageException("Argument ``" + arg + "`` must NOT be specified on non-" + role + " ranks.",
            "rank " + rank + " is not the " + role + " (rank " + root + ") but passed " + list.size()
                + " tensor(s); expected none");
      }
      return;
    }
    if (!given) {
      throw new UsageException("Argument ``" + arg + "`` must be specified on " + role + " rank.",
          "rank " + rank + " is the " + role + "; expected " + worldSize + " tensors, got none");
    }
    if (list.size() != worldSize) {
      String cap = side.substring(0, 1).toUpperCase(java.util.Locale.ROOT) + side.substring(1);
      throw new UsageException(prefix + "Incorrect " + side + " list size " + list.size() + ". " + cap
          + " list size should be " + worldSize + ", same as size of the process group.", "rank " + rank);
    }
    // The entries are tensors of like's dtype (listDtypes); ProcessGroupNCCL's type check cannot fail after it.
    for (int i = 0; like != null && i < list.size(); i++) {
      Tensor t = (Tensor) list.get(i);
      if (t.count() != like.count()) {
        throw new UsageException(prefix + "invalid tensor size at index " + i + " (expected (" + like.count()
            + "), got (" + t.count() + "))", "rank " + rank);
      }
    }
  }

  private void length(List<Tensor> list, String message, String arg) {
    int n = list == null ? 0 : list.size();
    if (n != worldSize) {
      throw new UsageException(message + " (expected length " + worldSize + ", got " + n + ")",
          "rank " + rank + ": " + arg + " must hold one tensor per rank");
    }
    for (int i = 0; i < n; i++) {
      checks.tensor(list.get(i), arg + "[" + i + "]");
    }
  }

  /** Per-rank counts of a list that stands for all-to-all splits. */
  private long[] splits(List<Tensor> list, String arg) {
    int n = list == null ? 0 : list.size();
    if (n != worldSize) {
      throw new UsageException("Number of tensor splits not equal to group size",
          "rank " + rank + ": " + arg + " has " + n + " tensors, group size " + worldSize);
    }
    long[] counts = new long[n];
    for (int i = 0; i < n; i++) {
      checks.tensor(list.get(i), arg + "[" + i + "]");
      counts[i] = list.get(i).count();
    }
    return counts;
  }

  /**
   * torch.distributed's _ensure_all_tensors_same_dtype over {@code list} and {@code other}, in
   * PyTorch's order ({@code other} first when {@code otherFirst}), with its message as PyTorch
   * prints it (no space after "dtypes", two before the second type).
   */
  private void sameDtype(List<Tensor> list, Tensor other, boolean otherFirst) {
    DType last = otherFirst ? other.dtype() : list.get(0).dtype();
    List<Tensor> rest = otherFirst ? list : new java.util.ArrayList<>(list.subList(1, list.size()));
    if (!otherFirst) {
      rest.add(other);
    }
    for (Tensor t : rest) {
      if (t.dtype() != last) {
        throw new UsageException("Invalid usage of tensors with different dtypesFound torch." + last.torchName()
            + " and  torch." + t.dtype().torchName(), "rank " + rank);
      }
    }
  }

  private static boolean sameSizes(List<Tensor> list) {
    for (Tensor t : list) {
      if (t.count() != list.get(0).count()) {
        return false;
      }
    }
    return true;
  }
}
