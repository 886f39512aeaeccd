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
  void aLongErrorIsCutShort() {
    String long_ = "x".repeat(5000);
    assertThat(Messages.describe(new RuntimeException(long_))).hasSize(Messages.MAX_ERROR_CHARS + 1).endsWith("…");
  }
}
