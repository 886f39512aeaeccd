package io.nccl4j;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowable;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.nccl4j.testing.TestTime;
import io.nccl4j.testing.TorchPythons;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.assertj.core.api.ThrowableAssert.ThrowingCallable;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * PyTorch itself as the oracle of the messages {@link TorchMessagesTest} pins to its source lines: torch 2.x and
 * Debian's 1.13 make the same mistakes on a one-rank gloo group (torch_messages.py) and nccl4j's
 * {@link UsageException#torchMessage()} for each is compared with what that torch says. Each test skips, saying how
 * to install the torch it needs, when that torch is absent; {@code .ci/run} installs both.
 */
@Tag("multiprocess")
class TorchMessagesOracleTest {
  @TempDir
  Path dir;

  private final ListChecks lists = new ListChecks(new Checks(0, 1, Device.cpu()));

  @Test
  void torch2SaysWhatNccl4jSays() throws Exception {
    String python = TorchPythons.current().orElseGet(() -> {
      Assumptions.abort(TorchPythons.CURRENT_HOW);
      return null;
    });
    JsonNode torch = ask(python);
    assertThat(torch.get("version").asText()).doesNotStartWith("1.");
    compare(torch, "gather_dtype", this::gatherDtype);
    compare(torch, "scatter_dtype", this::scatterDtype);
    compare(torch, "reduce_scatter_length", this::reduceScatterLength);
    compare(torch, "new_group_duplicate", () -> Subgroups.checkedMembers(new int[] {0, 0}, 1));
    compare(torch, "new_group_too_many", () -> Subgroups.checkedMembers(new int[] {0, 1}, 1));
    compare(torch, "new_group_out_of_range", () -> Subgroups.checkedMembers(new int[] {5}, 1));
  }

  /** Torch 1.13 raises the dtype check of gather and scatter with the same words (its gloo has no reduce_scatter). */
  @Test
  void torch1SaysWhatNccl4jSaysOfListDtypes() throws Exception {
    String python = TorchPythons.legacy().orElseGet(() -> {
      Assumptions.abort(TorchPythons.LEGACY_HOW);
      return null;
    });
    JsonNode torch = ask(python);
    assertThat(torch.get("version").asText()).startsWith("1.");
    compare(torch, "gather_dtype", this::gatherDtype);
    compare(torch, "scatter_dtype", this::scatterDtype);
  }

  private void gatherDtype() {
    try (Tensor in = Tensor.zeros(2, DType.FLOAT32); Tensor entry = Tensor.zeros(2, DType.INT64)) {
      lists.gather(in, List.of(entry), 0);
    }
  }

  private void scatterDtype() {
    try (Tensor out = Tensor.zeros(2, DType.INT32); Tensor entry = Tensor.zeros(2, DType.FLOAT16)) {
      lists.scatter(out, List.of(entry), 0);
    }
  }

  private void reduceScatterLength() {
    try (Tensor out = Tensor.zeros(2, DType.FLOAT32); Tensor a = Tensor.zeros(2, DType.FLOAT32);
        Tensor b = Tensor.zeros(2, DType.FLOAT32)) {
      lists.reduceScatter(out, List.of(a, b), ReduceOp.SUM);
    }
  }

  private static void compare(JsonNode torch, String mistake, ThrowingCallable nccl4j) {
    JsonNode said = torch.get(mistake);
    assertThat(said).as("torch %s raised nothing for %s", torch.get("version").asText(), mistake).isNotNull();
    assertThat(said.isNull()).as("torch %s raised nothing for %s", torch.get("version").asText(), mistake).isFalse();
    Throwable e = catchThrowable(nccl4j);
    assertThat(e).as(mistake).isInstanceOf(UsageException.class);
    assertThat(((UsageException) e).torchMessage()).as("%s: nccl4j's text against torch %s's", mistake,
        torch.get("version").asText()).isEqualTo(said.asText());
  }

  private JsonNode ask(String python) throws IOException, InterruptedException {
    Path script = dir.resolve("torch_messages.py");
    try (InputStream in = TorchMessagesOracleTest.class.getResourceAsStream("torch_messages.py")) {
      Files.write(script, in.readAllBytes());
    }
    Path err = dir.resolve("torch.err");
    Process p = TorchPythons.command(python, script.toString()).redirectError(err.toFile()).start();
    p.getOutputStream().close();
    String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8).trim();
    assertThat(p.waitFor(TestTime.scaledSeconds(120), TimeUnit.SECONDS)).as("torch exited").isTrue();
    assertThat(p.exitValue()).as("%s exited 0; its stderr:%n%s", python, Files.readString(err)).isZero();
    String[] lines = out.split("\n");
    return new ObjectMapper().readTree(lines[lines.length - 1]);
  }
}
