package io.nccl4j.cli;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * {@code --timeout} up to Long.MAX_VALUE seconds runs the experiment (main crashed from 292 years
 * on, in the CPU backend's deadline).
 */
@Tag("multirank")
class LongTimeoutCliTest {
  @ParameterizedTest
  @ValueSource(strings = {"2592000", "3153600000", "9223372036854775807"})
  void contractsRunWithTimeoutsUpToForever(String seconds) {
    PrintStream oldOut = System.out;
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    int code;
    try (PrintStream o = new PrintStream(out, true, StandardCharsets.UTF_8)) {
      System.setOut(o);
      code = Cli.execute("contracts", "--backend", "cpu", "--world-size", "2", "--timeout", seconds);
    } finally {
      System.setOut(oldOut);
    }
    String text = out.toString(StandardCharsets.UTF_8);
    assertThat(code).as(text).isZero();
    assertThat(text).contains("passed, 0 failed");
  }
}
