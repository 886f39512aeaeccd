package io.nccl4j.cli;

import static org.assertj.core.api.Assertions.assertThat;

import io.nccl4j.nccl.Nccl;
import io.nccl4j.testing.TestTime;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * {@code ./nccl4j weights}, the Java half of the PyTorch + Java pair: its usage errors, and the one line it prints
 * where NCCL cannot run. The pair itself needs a GPU: ci/gpu-check.sh runs it (check {@code mixed-group}).
 */
@Tag("unit")
class WeightsCommandTest {
  /** The group timeout the command line is given: a guard against a hang, scaled for a busy machine (TestTime). */
  private static final String GUARD_S = Long.toString(TestTime.scaledSeconds(60));
  private static CapturedRun execute(String... args) {
    String[] all = new String[args.length + 1];
    all[0] = "weights";
    System.arraycopy(args, 0, all, 1, args.length);
    return CapturedRun.of(() -> Cli.execute(all));
  }

  @Test
  void aStoreWithoutAPortIsAUsageError() {
    CapturedRun r = execute("--store", "localhost");
    assertThat(r.code()).isEqualTo(ExitCodes.USAGE);
    assertThat(r.err().trim()).isEqualTo("nccl4j: --store must be HOST:PORT with a port in 1..65535, got 'localhost'");
  }

  @Test
  void aRankOutsideTheGroupIsAUsageError() {
    CapturedRun r = execute("--store", "127.0.0.1:29500", "--rank", "2", "--world-size", "2");
    assertThat(r.code()).isEqualTo(ExitCodes.USAGE);
    assertThat(r.err().trim()).isEqualTo("nccl4j: --world-size must be 2..4 and --rank in 0..world size - 1, got rank 2"
        + " of 2");
  }

  @Test
  void aCountBeyondExactFloatSumsIsAUsageError() {
    CapturedRun r = execute("--store", "127.0.0.1:29500", "--count", "524289");
    assertThat(r.code()).isEqualTo(ExitCodes.USAGE);
    assertThat(r.err().trim()).isEqualTo("nccl4j: --count must be in 1..524288 (exact float32 sums), got 524289");
  }

  @Test
  void withoutNcclItSaysWhyBeforeWaitingForTheStore() {
    String why = Nccl.unavailableReason(1);
    Assumptions.assumeTrue(why != null, "NCCL runs here: the pair runs in ci/gpu-check.sh instead");
    // Port 1: nothing listens, and the command must not get as far as trying.
    CapturedRun r = execute("--store", "127.0.0.1:1", "--timeout", GUARD_S);
    assertThat(r.code()).isEqualTo(ExitCodes.USAGE);
    assertThat(r.err().trim()).isEqualTo("nccl4j: weights needs NCCL and a GPU: " + why);
  }
}
