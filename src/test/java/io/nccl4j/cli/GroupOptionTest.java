package io.nccl4j.cli;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.nccl4j.cli.bench.SampleException;
import io.nccl4j.testing.TestTime;
import java.util.List;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** {@code --group}: the contracts and the sweep on a subgroup of the world, the other ranks idle. */
@Tag("multirank")
class GroupOptionTest {
  /** The group timeout the command line is given: a guard against a hang, scaled for a busy machine (TestTime). */
  private static final String GUARD_S = Long.toString(TestTime.scaledSeconds(60));
  private static final String[] CONTRACT_NAMES = {"exact-sum-equivalence", "wrong-shard-order-rejected",
      "wrong-reduction-op-rejected", "padding-and-trim-equivalence", "nondivisible-without-padding-rejected"};

  @Test
  void contractsOnRanksZeroTwoFourOfFiveGiveFifteenRows() {
    SampleRunner.Output o = SampleRunner.run(new ContractsCommand(), ContractsCommand::run, "--backend", "cpu",
        "--world-size", "5", "--group", "0,2,4", "--timeout", GUARD_S);
    assertThat(o.ok()).as(o.text()).isTrue();
    assertThat(o.lines()).contains("group [0, 2, 4] (3 ranks) of world size 5, int64, count 20, non-divisible count"
        + " 1003");
    for (String name : CONTRACT_NAMES) {
      assertThat(o.lines()).contains(String.format("%-37s | %-9s | %s", name, 3, "PASS"));
    }
    assertThat(o.last()).isEqualTo("15 passed, 0 failed");
  }

  @ParameterizedTest
  @ValueSource(strings = {"allreduce", "allgather", "broadcast", "alltoall"})
  void theSweepOnASubgroupIsExactAndSaysWhichRanks(String op) {
    SampleRunner.Output o = SampleRunner.run(new SweepCommand(), SweepCommand::run, "--backend", "cpu",
        "--world-size", "4", "--group", "3,1", "--op", op, "-b", "1K", "-e", "4K", "-f", "4", "-n", "2", "-w", "1",
        "-c", "1", "--timeout", GUARD_S);
    assertThat(o.ok()).as(o.text()).isTrue();
    assertThat(o.lines().get(2)).startsWith("# " + op + ", 2 ranks (group [1, 3] (2 ranks) of world size 4), float32,");
    List<List<String>> rows = o.lines().stream().filter(l -> l.matches("^\\d+ +\\|.*")).map(SampleRunner::cells)
        .toList();
    assertThat(rows).hasSize(2);
    for (List<String> r : rows) {
      assertThat(r.get(8)).as("#wrong out of place").isIn("0", "N/A");
      assertThat(r.get(12)).as("#wrong in place").isIn("0", "N/A");
    }
    assertThat(o.last()).isEqualTo("# out-of-bounds values: 0 OK");
  }

  @Test
  void aRankOutsideTheWorldIsAUsageError() {
    assertThatThrownBy(() -> SampleRunner.run(new ContractsCommand(), ContractsCommand::run, "--backend", "cpu",
        "--world-size", "3", "--group", "0,3"))
        .isInstanceOf(SampleException.class).hasMessage("--group needs distinct ranks in 0..2, got [0, 3]");
  }
}
