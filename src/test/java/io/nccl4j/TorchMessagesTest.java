package io.nccl4j;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowable;

import java.util.ArrayList;
import java.util.List;
import org.assertj.core.api.ThrowableAssert.ThrowingCallable;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * Mistakes whose message nccl4j copies from PyTorch, each against the line of PyTorch's source it copies, as a user
 * porting a torch.distributed program meets them: torch 2.13.0 (git cf30153c) and Debian's torch 1.13.1.
 * {@link TorchMessagesOracleTest} asks those torches themselves. World size 4; rank 1 is the root.
 */
@Tag("unit")
class TorchMessagesTest {
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

  private List<Tensor> list(long count, DType... dtypes) {
    List<Tensor> l = new ArrayList<>();
    for (DType d : dtypes) {
      l.add(t(count, d));
    }
    return l;
  }

  private static UsageException usage(ThrowingCallable call) {
    Throwable e = catchThrowable(call);
    assertThat(e).isInstanceOf(UsageException.class);
    return (UsageException) e;
  }

  /**
   * torch.distributed.gather checks its tensors' dtypes in Python before anything else, on every rank, before the
   * destination is even looked at: torch/distributed/distributed_c10d.py:4636 in 2.13.0
   * ({@code _ensure_all_tensors_same_dtype(tensor, gather_list)}, message at line 1298: "Invalid usage of tensors
   * with different dtypes" f"Found {last_dtype} and  {tensor.dtype}") and line 2520 (message at 497) in 1.13.1.
   */
  @Test
  void aGatherListEntryOfAnotherDtypeHasTorchDistributedsMessage() {
    Tensor in = t(3, DType.FLOAT32);
    List<Tensor> mixed = list(3, DType.FLOAT32, DType.FLOAT32, DType.INT64, DType.FLOAT32);
    String torch = "Invalid usage of tensors with different dtypesFound torch.float32 and  torch.int64";
    UsageException onRoot = usage(() -> rootLists.gather(in, mixed, 1));
    assertThat(onRoot.torchMessage()).isEqualTo(torch);
    assertThat(onRoot).hasMessage(torch + " (rank 1)");
    // Python's check runs on every rank and before the destination's: a non-destination with such a list, and an
    // out-of-range destination, get it too.
    assertThat(usage(() -> otherLists.gather(in, mixed, 1))).hasMessage(torch + " (rank 2)");
    assertThat(usage(() -> rootLists.gather(in, mixed, 9))).hasMessage(torch + " (rank 1)");
  }

  /**
   * As gather: torch/distributed/distributed_c10d.py:4746 in 2.13.0
   * ({@code _ensure_all_tensors_same_dtype(tensor, scatter_list)}), line 2599 in 1.13.1; the received tensor's dtype
   * comes first in the message.
   */
  @Test
  void aScatterListEntryOfAnotherDtypeHasTorchDistributedsMessage() {
    Tensor out = t(3, DType.INT32);
    List<Tensor> mixed = list(3, DType.FLOAT16, DType.INT32, DType.INT32, DType.INT32);
    String torch = "Invalid usage of tensors with different dtypesFound torch.int32 and  torch.float16";
    UsageException e = usage(() -> rootLists.scatter(out, mixed, 1));
    assertThat(e.torchMessage()).isEqualTo(torch);
    assertThat(e).hasMessage(torch + " (rank 1)");
  }

  /**
   * ProcessGroupGloo::reduce_scatter in torch 2.13.0: torch/csrc/distributed/c10d/ProcessGroupGloo.cpp:2203 (its
   * invalidArgument lambda, as {@code TORCH_SHOW_CPP_STACKTRACES=1} shows) throws "invalid input tensor list size,
   * must be world size" for {@code dist.reduce_scatter(out, list)} with a list of another length. ProcessGroupNCCL
   * checks no length, and torch 1.13's gloo has no reduce_scatter.
   */
  @Test
  void aReduceScatterListOfTheWrongLengthHasGloosMessage() {
    Tensor out = t(3, DType.FLOAT32);
    String torch = "invalid input tensor list size, must be world size";
    UsageException e = usage(() -> rootLists.reduceScatter(out, list(3, DType.FLOAT32, DType.FLOAT32,
        DType.FLOAT32, DType.FLOAT32, DType.FLOAT32), ReduceOp.SUM));
    assertThat(e.torchMessage()).isEqualTo(torch);
    assertThat(e).hasMessage(torch + " (rank 1: input_list has 5 tensors, expected 4, one per rank)");
    assertThat(usage(() -> rootLists.reduceScatter(out, null, ReduceOp.SUM)))
        .hasMessage(torch + " (rank 1: input_list has 0 tensors, expected 4, one per rank)");
  }

  /**
   * torch.distributed.new_group in torch 2.13.0: torch/distributed/distributed_c10d.py:6001, after sorting the ranks
   * (line 5998): f"ranks list must not contain duplicate entries, got {ranks}". Torch 1.13 has no such check.
   */
  @Test
  void newGroupWithARepeatedRankHasTorchsMessage() {
    UsageException e = usage(() -> Subgroups.checkedMembers(new int[] {0, 0}, 2));
    assertThat(e.torchMessage()).isEqualTo("ranks list must not contain duplicate entries, got [0, 0]");
    assertThat(usage(() -> Subgroups.checkedMembers(new int[] {1, 0, 1}, 2)).torchMessage())
        .as("sorted, as PyTorch prints them").isEqualTo("ranks list must not contain duplicate entries, got [0, 1, 1]");
    // the duplicate check comes before the range check, as in PyTorch
    assertThat(usage(() -> Subgroups.checkedMembers(new int[] {5, 5}, 2)).torchMessage())
        .isEqualTo("ranks list must not contain duplicate entries, got [5, 5]");
  }

  /**
   * torch.distributed.new_group in torch 2.13.0, distributed_c10d.py:6014: f"Rank {rank} is out of range. Valid
   * ranks are 0 to {global_world_size - 1} " f"(world_size={global_world_size})", after line 6005's check of the
   * list's length ("the new group's world size should be less or equal to the world size set by
   * init_process_group"). Torch 1.13's text (distributed_c10d.py:3322, "The new group's rank should be within the the
   * world_size set by init_process_group") is older, and says neither the rank nor the range.
   */
  @Test
  void newGroupWithARankOutOfRangeHasTorchsMessage() {
    assertThat(usage(() -> Subgroups.checkedMembers(new int[] {0, 2}, 2)).torchMessage())
        .isEqualTo("Rank 2 is out of range. Valid ranks are 0 to 1 (world_size=2)");
    assertThat(usage(() -> Subgroups.checkedMembers(new int[] {-1}, 2)).torchMessage())
        .isEqualTo("Rank -1 is out of range. Valid ranks are 0 to 1 (world_size=2)");
    assertThat(usage(() -> Subgroups.checkedMembers(new int[] {0, 1, 2}, 2)).torchMessage())
        .isEqualTo("the new group's world size should be less or equal to the world size set by init_process_group");
  }
}
