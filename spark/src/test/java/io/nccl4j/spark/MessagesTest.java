package io.nccl4j.spark;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.List;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/** The verdict every task draws alone from the same gathered messages, and the messages' round trip. */
@Tag("unit")
class MessagesTest {
  @Test
  void reportsRoundTripThroughTheirText() {
    String[] gathered = {Messages.encode(Messages.Report.OK),
        Messages.encode(Messages.Report.failed(new IllegalStateException("no GPU", new RuntimeException("why"))))};
    List<Messages.Report> reports = Messages.decode(gathered, Messages.Report.class);
    assertThat(reports.get(0).error()).isNull();
    assertThat(reports.get(1).error())
        .isEqualTo("java.lang.IllegalStateException: no GPU; caused by java.lang.RuntimeException: why");
  }

  @Test
  void partitionsThatFailedAlikeAreNamedTogetherAndOthersApart() {
    List<Messages.Report> reports = List.of(new Messages.Report("E1"), Messages.Report.OK, new Messages.Report("E2"),
        new Messages.Report("E1"));
    SparkRendezvousException e = Messages.reportVerdict("stage 3.1", "join", reports);
    assertThat(e).hasMessage("stage 3.1: nccl4j's group of 4 tasks did not form: partitions 0, 3 could not join: E1;"
        + " partition 2 could not join: E2");
    assertThat(e.partitions()).containsExactly(0, 2, 3);
    assertThat(Messages.reportVerdict("stage 3.1", "join", List.of(Messages.Report.OK, Messages.Report.OK)))
        .isNull();
  }

  @Test
  void theFirstRoundFailsWhenPartitionZeroHasNoStoreOrTheBackendsDiffer() {
    Messages.Arrival zeroFailed = Messages.Arrival.of("cpu").withError(new IllegalStateException("port taken"));
    assertThat(Messages.arrivalVerdict("stage 0.0", List.of(zeroFailed, Messages.Arrival.of("cpu"))))
        .hasMessage("stage 0.0: nccl4j's group of 2 tasks did not form: partition 0 could not start the group's"
            + " store: java.lang.IllegalStateException: port taken");
    Messages.Arrival zero = Messages.Arrival.of("cpu").withStore("10.0.0.1", 4242, "spark:app:stage-0.0:ab", "00");
    assertThat(Messages.arrivalVerdict("stage 0.0", List.of(zero, Messages.Arrival.of("cpu")))).isNull();
    assertThat(Messages.arrivalVerdict("stage 0.0", List.of(zero, Messages.Arrival.of("nccl"),
        Messages.Arrival.of("cpu"))).getMessage())
        .endsWith("its tasks asked for different backends: 'cpu' (partitions 0, 2), 'nccl' (partition 1); every task"
            + " of the stage must pass the same backend");
  }

  @Test
  void tasksOfOneExecutorGivenOneGpuFailNamingThePartitionsTheAddressAndTheSetting() {
    String a = "10.0.0.7:41234";
    String b = "10.0.0.8:41234";
    // What each task sent (through its JSON, as allGather carries it): partitions 0 and 2 of executor a got GPU 0.
    List<Messages.Arrival> arrivals = Messages.decode(new String[] {
        Messages.encode(Messages.Arrival.of("nccl").withGpus(List.of("0"))
            .withStore("10.0.0.7", 4242, "spark:app:stage-4.0:ab", "00")),
        Messages.encode(Messages.Arrival.of("nccl").withGpus(List.of("1"))),
        Messages.encode(Messages.Arrival.of("nccl").withGpus(List.of("0"))),
        Messages.encode(Messages.Arrival.of("nccl").withGpus(List.of("0")))}, Messages.Arrival.class);
    assertThat(arrivals.get(0).gpus()).containsExactly("0");
    assertThat(arrivals.get(0).storePort()).isEqualTo(4242);
    SparkRendezvousException e = Messages.sharedGpuVerdict("stage 4.0", "gpu", List.of(a, a, a, b), arrivals);
    assertThat(e).hasMessage("stage 4.0: nccl4j's group of 4 tasks did not form: partitions 0, 2 share GPU 0 (their"
        + " 'gpu' resource's address on the executor at 10.0.0.7:41234), and NCCL needs a GPU of its own for each"
        + " rank: a fractional spark.task.resource.gpu.amount (or a stage's task resource profile asking for less"
        + " than one gpu) lets tasks share one; set spark.task.resource.gpu.amount=1");
    assertThat(e.partitions()).containsExactly(0, 2);
    // Partition 3's GPU 0 is an ordinal of another executor's devices: not compared.
    assertThat(Messages.sharedGpuVerdict("stage 4.0", "gpu", List.of(a, a, b, b),
        List.of(arrivals.get(0), arrivals.get(1), arrivals.get(2), Messages.Arrival.of("nccl").withGpus(List.of("1")))))
        .isNull();
  }

  @Test
  void everyPairThatSharesIsNamedAndTasksWithoutAGpuAreLeftToTheJoin() {
    String x = "[fe80::1]:7078";
    List<Messages.Arrival> arrivals = List.of(Messages.Arrival.of("nccl").withGpus(List.of("0", "1")),
        Messages.Arrival.of("nccl").withGpus(List.of("1")), Messages.Arrival.of("nccl").withGpus(List.of()),
        Messages.Arrival.of("nccl").withGpus(List.of("0")));
    SparkRendezvousException e = Messages.sharedGpuVerdict("stage 1.2", "nvidia", List.of(x, x, x, x), arrivals);
    assertThat(e.getMessage()).contains(": partitions 0, 3 share GPU 0 (their 'nvidia' resource's address on the"
        + " executor at [fe80::1]:7078); partitions 0, 1 share GPU 1 (")
        .endsWith("set spark.task.resource.nvidia.amount=1");
    assertThat(e.partitions()).containsExactly(0, 1, 3);
    // The CPU backend sends no GPUs.
    assertThat(Messages.sharedGpuVerdict("stage 1.2", "gpu", List.of(x, x),
        List.of(Messages.Arrival.of("cpu"), Messages.Arrival.of("cpu")))).isNull();
  }

  @Test
  void aLongErrorIsCutShort() {
    String long_ = "x".repeat(5000);
    assertThat(Messages.describe(new RuntimeException(long_))).hasSize(Messages.MAX_ERROR_CHARS + 1).endsWith("…");
  }
}
