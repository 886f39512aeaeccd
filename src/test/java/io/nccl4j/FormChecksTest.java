package io.nccl4j;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatCode;
import static org.assertj.core.api.Assertions.catchThrowable;

import java.util.ArrayList;
import java.util.List;
import org.assertj.core.api.ThrowableAssert.ThrowingCallable;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * The checks of gather and scatter ({@link Checks}) and of the list forms ({@link ListChecks}):
 * every message word for word, PyTorch's text first, then what was expected and got, naming the
 * rank. World size 4; rank 1 is the root unless a test says otherwise.
 */
@Tag("unit")
class FormChecksTest {
  private static final int P = 4;
  private final Checks root = new Checks(1, P, Device.cpu());
  private final Checks other = new Checks(2, P, Device.cpu());
  private final ListChecks rootLists = new ListChecks(root);
  private final ListChecks otherLists = new ListChecks(other);
  private final List<Tensor> made = new ArrayList<>();

  @AfterEach
  void close() {
    made.forEach(Tensor::close);
  }

  private Tensor t(long count, DType dtype) {
    Tensor x = Tensor.empty(count, dtype);
    made.add(x);
    return x;
  }

  private List<Tensor> list(int entries, long count, DType dtype) {
    List<Tensor> l = new ArrayList<>();
    for (int i = 0; i < entries; i++) {
      l.add(t(count, dtype));
    }
    return l;
  }

  private static void usage(ThrowingCallable call, String torchMessage, String message) {
    Throwable e = catchThrowable(call);
    assertThat(e).isInstanceOf(UsageException.class).hasMessage(message);
    assertThat(((UsageException) e).torchMessage()).isEqualTo(torchMessage);
  }

  // ------------------------------------------------------------------ gather into a tensor

  @Test
  void gatherIntoTensorRefusesAMissingOutputOnTheRootAndOneElsewhere() {
    Tensor in = t(3, DType.FLOAT32);
    usage(() -> root.gather(in, null, 1), "Argument ``gather_list`` must be specified on destination rank.",
        "Argument ``gather_list`` must be specified on destination rank. (rank 1 is the root; expected a tensor of"
            + " world size 4 × 3 elements, got null)");
    Tensor out = t(12, DType.FLOAT32);
    usage(() -> other.gather(in, out, 1), "Argument ``gather_list`` must NOT be specified on non-destination ranks.",
        "Argument ``gather_list`` must NOT be specified on non-destination ranks. (rank 2 is not the root (rank 1);"
            + " expected null, got " + out.describe() + ")");
    assertThatCode(() -> root.gather(in, out, 1)).doesNotThrowAnyException();
    assertThatCode(() -> other.gather(in, null, 1)).doesNotThrowAnyException();
  }

  @Test
  void gatherIntoTensorChecksRootSizeAndType() {
    Tensor in = t(3, DType.FLOAT32);
    usage(() -> root.gather(in, null, 4), "ProcessGroupNCCL::gather: invalid root rank: 4",
        "ProcessGroupNCCL::gather: invalid root rank: 4 (valid ranks are 0..3)");
    usage(() -> root.gather(in, t(11, DType.FLOAT32), 1),
        "output tensor size must be equal to world_size times input tensor size",
        "output tensor size must be equal to world_size times input tensor size (input: 3 elements × world size 4 ="
            + " 12, output: 11 elements)");
    usage(() -> root.gather(in, t(12, DType.INT64), 1), "output tensor must have the same type as input tensor",
        "output tensor must have the same type as input tensor (input: float32, output: int64)");
  }

  @Test
  void gatherInPlaceNeedsTheInputToBeTheRootsBlock() {
    Tensor out = t(12, DType.FLOAT32);
    assertThatCode(() -> root.gather(out.slice(3, 3), out, 1)).doesNotThrowAnyException();
    usage(() -> root.gather(out.slice(6, 3), out, 1), "Tensors must be non-overlapping and dense",
        "Tensors must be non-overlapping and dense (input overlaps output but is not block 1 of it: expected it to"
            + " start at element 3 of output, but it starts at element 6 of output (all-gather needs sendbuff =="
            + " recvbuff + rank·sendcount))");
  }

  // ------------------------------------------------------------------ scatter from a tensor

  @Test
  void scatterTensorRefusesAMissingInputOnTheRootAndOneElsewhere() {
    Tensor out = t(3, DType.FLOAT32);
    usage(() -> root.scatter(out, null, 1), "Argument ``scatter_list`` must be specified on source rank.",
        "Argument ``scatter_list`` must be specified on source rank. (rank 1 is the root; expected a tensor of world"
            + " size 4 × 3 elements, got null)");
    Tensor in = t(12, DType.FLOAT32);
    usage(() -> other.scatter(out, in, 1), "Argument ``scatter_list`` must NOT be specified on non-source ranks.",
        "Argument ``scatter_list`` must NOT be specified on non-source ranks. (rank 2 is not the root (rank 1);"
            + " expected null, got " + in.describe() + ")");
    assertThatCode(() -> root.scatter(out, in, 1)).doesNotThrowAnyException();
    assertThatCode(() -> other.scatter(out, null, 1)).doesNotThrowAnyException();
  }

  @Test
  void scatterTensorChecksRootSizeTypeAndPlace() {
    Tensor out = t(3, DType.FLOAT32);
    usage(() -> other.scatter(out, null, -1), "ProcessGroupNCCL::scatter: invalid root rank: -1",
        "ProcessGroupNCCL::scatter: invalid root rank: -1 (valid ranks are 0..3)");
    usage(() -> root.scatter(out, t(13, DType.FLOAT32), 1),
        "input tensor must be the same size as output size times world size",
        "input tensor must be the same size as output size times world size (input: 13 elements, output: 3 elements"
            + " × world size 4 = 12)");
    usage(() -> root.scatter(out, t(12, DType.INT32), 1), "input tensor must be the same type as the output tensor.",
        "input tensor must be the same type as the output tensor. (input: int32, output: float32)");
    Tensor in = t(12, DType.FLOAT32);
    assertThatCode(() -> root.scatter(in.slice(3, 3), in, 1)).doesNotThrowAnyException();
    usage(() -> root.scatter(in.slice(0, 3), in, 1), "Tensors must be non-overlapping and dense",
        "Tensors must be non-overlapping and dense (output overlaps input but is not block 1 of it: expected it to"
            + " start at element 3 of input, but it starts at element 0 of input (scatter in place needs recvbuff =="
            + " sendbuff + root·recvcount))");
  }

  // ------------------------------------------------------------------ gather and scatter of lists

  @Test
  void gatherListHasProcessGroupNcclsListMessages() {
    Tensor in = t(3, DType.FLOAT32);
    usage(() -> rootLists.gather(in, List.of(), 1), "Argument ``gather_list`` must be specified on destination rank.",
        "Argument ``gather_list`` must be specified on destination rank. (rank 1 is the destination; expected 4"
            + " tensors, got none)");
    usage(() -> otherLists.gather(in, list(4, 3, DType.FLOAT32), 1),
        "Argument ``gather_list`` must NOT be specified on non-destination ranks.",
        "Argument ``gather_list`` must NOT be specified on non-destination ranks. (rank 2 is not the destination"
            + " (rank 1) but passed 4 tensor(s); expected none)");
    usage(() -> rootLists.gather(in, list(3, 3, DType.FLOAT32), 1),
        "ProcessGroupNCCL::gather: Incorrect output list size 3. Output list size should be 4, same as size of the"
            + " process group.",
        "ProcessGroupNCCL::gather: Incorrect output list size 3. Output list size should be 4, same as size of the"
            + " process group. (rank 1)");
    List<Tensor> wrongType = list(4, 3, DType.FLOAT32);
    wrongType.set(2, t(3, DType.INT64));
    usage(() -> rootLists.gather(in, wrongType, 1),
        "Invalid usage of tensors with different dtypesFound torch.float32 and  torch.int64",
        "Invalid usage of tensors with different dtypesFound torch.float32 and  torch.int64 (rank 1)");
    List<Tensor> wrongSize = list(4, 3, DType.FLOAT32);
    wrongSize.set(3, t(2, DType.FLOAT32));
    usage(() -> rootLists.gather(in, wrongSize, 1),
        "ProcessGroupNCCL::gather: invalid tensor size at index 3 (expected (3), got (2))",
        "ProcessGroupNCCL::gather: invalid tensor size at index 3 (expected (3), got (2)) (rank 1)");
    usage(() -> otherLists.gather(in, null, 9), "ProcessGroupNCCL::gather: invalid root rank: 9",
        "ProcessGroupNCCL::gather: invalid root rank: 9 (valid ranks are 0..3)");
    assertThatCode(() -> otherLists.gather(in, null, 1)).doesNotThrowAnyException();
    assertThatCode(() -> rootLists.gather(in, list(4, 3, DType.FLOAT32), 1)).doesNotThrowAnyException();
  }

  @Test
  void scatterListHasProcessGroupNcclsListMessages() {
    Tensor out = t(3, DType.INT32);
    usage(() -> rootLists.scatter(out, null, 1), "Argument ``scatter_list`` must be specified on source rank.",
        "Argument ``scatter_list`` must be specified on source rank. (rank 1 is the source; expected 4 tensors, got"
            + " none)");
    usage(() -> otherLists.scatter(out, list(1, 3, DType.INT32), 1),
        "Argument ``scatter_list`` must NOT be specified on non-source ranks.",
        "Argument ``scatter_list`` must NOT be specified on non-source ranks. (rank 2 is not the source (rank 1) but"
            + " passed 1 tensor(s); expected none)");
    usage(() -> rootLists.scatter(out, list(5, 3, DType.INT32), 1),
        "ProcessGroupNCCL::scatter: Incorrect input list size 5. Input list size should be 4, same as size of the"
            + " process group.",
        "ProcessGroupNCCL::scatter: Incorrect input list size 5. Input list size should be 4, same as size of the"
            + " process group. (rank 1)");
    List<Tensor> wrongType = list(4, 3, DType.INT32);
    wrongType.set(0, t(3, DType.FLOAT16));
    usage(() -> rootLists.scatter(out, wrongType, 1),
        "Invalid usage of tensors with different dtypesFound torch.int32 and  torch.float16",
        "Invalid usage of tensors with different dtypesFound torch.int32 and  torch.float16 (rank 1)");
    List<Tensor> wrongSize = list(4, 3, DType.INT32);
    wrongSize.set(1, t(4, DType.INT32));
    usage(() -> rootLists.scatter(out, wrongSize, 1),
        "ProcessGroupNCCL::scatter: invalid tensor size at index 1 (expected (3), got (4))",
        "ProcessGroupNCCL::scatter: invalid tensor size at index 1 (expected (3), got (4)) (rank 1)");
  }

  // ------------------------------------------------------------------ all-gather, reduce-scatter, all-to-all lists

  @Test
  void allGatherListChecksLengthDtypeAndOwnEntry() {
    Tensor in = t(3, DType.FLOAT32);
    usage(() -> rootLists.allGather(list(3, 3, DType.FLOAT32), in),
        "ProcessGroupGloo::allgather: invalid output tensor list at index 0 (expected length 4, got 3)",
        "ProcessGroupGloo::allgather: invalid output tensor list at index 0 (expected length 4, got 3) (rank 1:"
            + " tensor_list must hold one tensor per rank)");
    List<Tensor> mixed = list(4, 3, DType.FLOAT32);
    mixed.set(3, t(3, DType.INT64));
    usage(() -> rootLists.allGather(mixed, in),
        "Invalid usage of tensors with different dtypesFound torch.float32 and  torch.int64",
        "Invalid usage of tensors with different dtypesFound torch.float32 and  torch.int64 (rank 1)");
    usage(() -> rootLists.allGather(list(4, 3, DType.INT64), in),
        "Invalid usage of tensors with different dtypesFound torch.int64 and  torch.float32",
        "Invalid usage of tensors with different dtypesFound torch.int64 and  torch.float32 (rank 1)");
    usage(() -> rootLists.allGather(list(4, 2, DType.FLOAT32), in),
        "output tensor size must be equal to world_size times input tensor size",
        "output tensor size must be equal to world_size times input tensor size (rank 1: input has 3 elements,"
            + " tensor_list[1] has 2)");
    List<Tensor> uneven = list(4, 3, DType.FLOAT32);
    uneven.set(1, t(5, DType.FLOAT32));
    usage(() -> rootLists.allGather(uneven, in),
        "Tensor input and output of _broadcast_oop must have the same number of elements ",
        "Tensor input and output of _broadcast_oop must have the same number of elements  (rank 1: input has 3"
            + " elements, tensor_list[1] has 5)");
    assertThat(rootLists.allGather(list(4, 3, DType.FLOAT32), in)).as("even").isTrue();
    uneven.set(1, t(3, DType.FLOAT32));
    uneven.set(2, t(7, DType.FLOAT32));
    assertThat(rootLists.allGather(uneven, in)).as("uneven").isFalse();
  }

  @Test
  void reduceScatterListChecksLengthDtypeOperatorAndOwnEntry() {
    Tensor out = t(3, DType.FLOAT32);
    usage(() -> rootLists.reduceScatter(out, list(5, 3, DType.FLOAT32), ReduceOp.SUM),
        "invalid input tensor list size, must be world size",
        "invalid input tensor list size, must be world size (rank 1: input_list has 5 tensors, expected 4, one per"
            + " rank)");
    usage(() -> rootLists.reduceScatter(out, list(4, 3, DType.FLOAT64), ReduceOp.SUM),
        "Invalid usage of tensors with different dtypesFound torch.float32 and  torch.float64",
        "Invalid usage of tensors with different dtypesFound torch.float32 and  torch.float64 (rank 1)");
    usage(() -> rootLists.reduceScatter(out, list(4, 3, DType.FLOAT32), ReduceOp.BAND),
        "Cannot use ReduceOp.BAND with NCCL", "Cannot use ReduceOp.BAND with NCCL");
    usage(() -> rootLists.reduceScatter(out, list(4, 4, DType.FLOAT32), ReduceOp.SUM),
        "input tensor must be the same size as output size times world size",
        "input tensor must be the same size as output size times world size (rank 1: output has 3 elements,"
            + " input_list[1] has 4)");
    List<Tensor> uneven = list(4, 3, DType.FLOAT32);
    uneven.set(1, t(2, DType.FLOAT32));
    usage(() -> rootLists.reduceScatter(out, uneven, ReduceOp.SUM),
        "Tensor input and output of _reduce_oop must have the same number of elements ",
        "Tensor input and output of _reduce_oop must have the same number of elements  (rank 1: output has 3"
            + " elements, input_list[1] has 2)");
  }

  @Test
  void allToAllListsNeedOneTensorPerRankOfOneDtype() {
    usage(() -> rootLists.allToAll(list(4, 1, DType.UINT8), list(3, 1, DType.UINT8)),
        "Number of tensor splits not equal to group size",
        "Number of tensor splits not equal to group size (rank 1: input_tensor_list has 3 tensors, group size 4)");
    usage(() -> rootLists.allToAll(list(2, 1, DType.UINT8), list(4, 1, DType.UINT8)),
        "Number of tensor splits not equal to group size",
        "Number of tensor splits not equal to group size (rank 1: output_tensor_list has 2 tensors, group size 4)");
    usage(() -> rootLists.allToAll(list(4, 1, DType.UINT8), list(4, 1, DType.INT8)),
        "Invalid usage of tensors with different dtypesFound torch.uint8 and  torch.int8",
        "Invalid usage of tensors with different dtypesFound torch.uint8 and  torch.int8 (rank 1)");
    List<Tensor> in = List.of(t(1, DType.UINT8), t(2, DType.UINT8), t(3, DType.UINT8), t(4, DType.UINT8));
    long[][] splits = rootLists.allToAll(list(4, 5, DType.UINT8), in);
    assertThat(splits[0]).containsExactly(1, 2, 3, 4);
    assertThat(splits[1]).containsExactly(5, 5, 5, 5);
  }

  // ------------------------------------------------------------------ batch_isend_irecv

  @Test
  void batchNeedsOperationsAndChecksEachBeforeAny() {
    usage(() -> rootLists.batch(null),
        "Invalid ``p2p_op_list``. Each op is expected to to be of type ``torch.distributed.P2POp``.",
        "Invalid ``p2p_op_list``. Each op is expected to to be of type ``torch.distributed.P2POp``. (rank 1: got"
            + " null)");
    List<P2POp> withNull = new ArrayList<>();
    withNull.add(P2POp.isend(t(1, DType.INT8), 0));
    withNull.add(null);
    usage(() -> rootLists.batch(withNull),
        "Invalid ``p2p_op_list``. Each op is expected to to be of type ``torch.distributed.P2POp``.",
        "Invalid ``p2p_op_list``. Each op is expected to to be of type ``torch.distributed.P2POp``. (rank 1: got a"
            + " null op)");
    usage(() -> rootLists.batch(List.of(P2POp.isend(t(1, DType.INT8), 0), P2POp.irecv(t(1, DType.INT8), 1))),
        "Invalid source rank: source rank should not be the same as the rank of the current process.",
        "Invalid source rank: source rank should not be the same as the rank of the current process. (Source and"
            + " current rank are both 1)");
    usage(() -> new P2POp(null, t(1, DType.INT8), 0),
        "Invalid ``op``. Expected ``op`` to be of type ``torch.distributed.isend`` or ``torch.distributed.irecv``.",
        "Invalid ``op``. Expected ``op`` to be of type ``torch.distributed.isend`` or ``torch.distributed.irecv``."
            + " (got null for the operation with peer 0)");
    assertThatCode(() -> rootLists.batch(List.of())).doesNotThrowAnyException();
  }
}
