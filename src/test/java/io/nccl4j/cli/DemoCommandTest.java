package io.nccl4j.cli;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * {@code ./nccl4j demo}: every experiment at small sizes; by default the backend it chose (and why, once) and one
 * summary line, with {@code --details} every experiment's own output too.
 */
@Tag("multirank")
class DemoCommandTest {
  @Test
  void byDefaultTheDemoPrintsItsBackendAndOneSummaryLine() {
    SampleRunner.Output o = SampleRunner.run(new DemoCommand(), DemoCommand::run, "--backend", "cpu");
    assertThat(o.ok()).as(o.text()).isTrue();
    assertThat(o.lines()).as(o.text()).hasSize(2);
    assertThat(o.lines().get(0)).isEqualTo("nccl4j demo — backend: cpu (requested with --backend cpu), world size 4");
    assertThat(o.last()).startsWith(
        "demo passed: equivalence PASS, contracts PASS, bench PASS, memory PASS, probe PASS, sweep PASS")
        .contains("(backend cpu, world size 4, ");
  }

  @Test
  void withDetailsTheDemoPrintsEveryExperimentAndTheBackendsReasonOnce() {
    SampleRunner.Output o = SampleRunner.run(new DemoCommand(), DemoCommand::run, "--details");
    assertThat(o.ok()).as(o.text()).isTrue();
    assertThat(o.lines()).containsSubsequence("### 1. equivalence", "### 2. contracts", "### 3. bench (small sizes)",
        "### 4. memory (16 MiB per rank)", "### 5. probe (4 MiB per rank)", "### 6. sweep (allreduce, 1 KiB to 1 MiB)");
    assertThat(o.lines()).contains("20 passed, 0 failed", "API-call counts: as expected",
        "every rank matches the expected figures; every result element verified",
        "every element verified every cycle: 0 wrong", "# out-of-bounds values: 0 OK");
    // The first line says which backend auto chose and why (on a machine without NCCL, the whole reason NCCL is
    // not usable); no other line repeats it.
    String first = o.lines().get(0);
    assertThat(first).startsWith("nccl4j demo — backend: ");
    String reason = first.substring(first.indexOf('(') + 1, first.lastIndexOf(')'));
    assertThat(o.lines().stream().skip(1).filter(l -> l.contains(reason))).as(o.text()).isEmpty();
    assertThat(o.last()).startsWith(
        "demo passed: equivalence PASS, contracts PASS, bench PASS, memory PASS, probe PASS, sweep PASS");
  }

  @Test
  void demoAtWorldSizeThree() {
    SampleRunner.Output o = SampleRunner.run(new DemoCommand(), DemoCommand::run, "--backend", "cpu",
        "--world-size", "3", "--details");
    assertThat(o.ok()).as(o.text()).isTrue();
    assertThat(o.lines()).contains("15 passed, 0 failed");
    assertThat(o.last()).startsWith(
        "demo passed: equivalence PASS, contracts PASS, bench PASS, memory PASS, probe PASS, sweep PASS")
        .contains("world size 3");
  }
}
