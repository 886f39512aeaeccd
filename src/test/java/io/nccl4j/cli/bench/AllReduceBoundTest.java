package io.nccl4j.cli.bench;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/** What {@code sweep --bound} counts an AllReduce as moving through the measured bandwidth. */
@Tag("unit")
public class AllReduceBoundTest {
  private static final long S = 64L << 20;
  private static final Bounds.Bandwidth MEMORY = new Bounds.Bandwidth(40e9, "copies", true);
  private static final Bounds.Bandwidth TCP = new Bounds.Bandwidth(2e9, "streams", false);

  @Test
  void oneHostIsUnchanged() {
    assertThat(AllReduceBound.oneHost(MEMORY).bytes(S, 4)).isEqualTo(2.0 * 4 * S);
    assertThat(AllReduceBound.oneHost(MEMORY).formula())
        .isEqualTo("2pS / B (tensors every rank reaches in place: each input read once, each output written once)");
    assertThat(AllReduceBound.oneHost(TCP).bytes(S, 4)).isEqualTo(2.0 * 3 * S);
    assertThat(AllReduceBound.oneHost(TCP).formula()).isEqualTo("2(p-1)S / B (a ring's bytes through the loopback)");
  }

  @Test
  void acrossHostsEachLinkCarriesTwiceHMinusOneOverHOfS() {
    // The ranks per host do not matter: within a host nothing crosses the link.
    for (int p : new int[] {2, 4, 16}) {
      assertThat(new AllReduceBound(TCP, 2).bytes(S, p)).isEqualTo((double) S);
    }
    assertThat(new AllReduceBound(TCP, 4).bytes(S, 16)).isEqualTo(1.5 * S);
    assertThat(new AllReduceBound(TCP, 8).bytes(S, 8)).isEqualTo(1.75 * S);
    assertThat(new AllReduceBound(TCP, 2).micros(S, 4)).isEqualTo(S / 2e9 * 1e6);
    assertThat(new AllReduceBound(TCP, 3).formula())
        .isEqualTo("2(H-1)S/H / B with H = 3 hosts (what crosses each host's link in a hierarchical AllReduce)");
  }

  @Test
  void acrossHostsTheBoundIsALinkNotMemory() {
    assertThatThrownBy(() -> new AllReduceBound(MEMORY, 2)).hasMessageContaining("2 hosts");
    assertThatThrownBy(() -> new AllReduceBound(TCP, 0)).hasMessageContaining("hosts must be >= 1");
  }
}
