package io.nccl4j.launch;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.Map;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/** {@code NCCL4J_STORE_ADMIT_PYTORCH}: off unless it is 1; any other value is an error naming the variable. */
@Tag("unit")
class StoreAdmissionSettingTest {
  @Test
  void unsetEmptyOrZeroAdmitsOnlyTheJob() {
    assertThat(ProcessGroups.admitsPyTorch(Map.of())).isFalse();
    assertThat(ProcessGroups.admitsPyTorch(Map.of(ProcessGroups.ADMIT_PYTORCH_ENV, " "))).isFalse();
    assertThat(ProcessGroups.admitsPyTorch(Map.of(ProcessGroups.ADMIT_PYTORCH_ENV, "0"))).isFalse();
  }

  @Test
  void oneAdmitsPyTorchsClients() {
    assertThat(ProcessGroups.admitsPyTorch(Map.of(ProcessGroups.ADMIT_PYTORCH_ENV, "1"))).isTrue();
  }

  @Test
  void anythingElseIsAnError() {
    assertThatThrownBy(() -> ProcessGroups.admitsPyTorch(Map.of(ProcessGroups.ADMIT_PYTORCH_ENV, "yes")))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessage("NCCL4J_STORE_ADMIT_PYTORCH must be 0 or 1, got 'yes'");
  }
}
