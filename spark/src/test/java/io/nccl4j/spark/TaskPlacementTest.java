package io.nccl4j.spark;

import static org.assertj.core.api.Assertions.assertThat;

import io.nccl4j.launch.DistEnv;
import java.util.List;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/** Ranks, local ranks and hosts from the executors' addresses Spark gives a barrier stage's tasks. */
@Tag("unit")
class TaskPlacementTest {
  @Test
  void theHostOfSparksAddress() {
    assertThat(TaskPlacement.host("10.0.0.7:41234")).isEqualTo("10.0.0.7");
    assertThat(TaskPlacement.host("node-3.cluster:7078")).isEqualTo("node-3.cluster");
    assertThat(TaskPlacement.host("[fe80::1]:7078")).isEqualTo("fe80::1");
    assertThat(TaskPlacement.host("fe80::1")).isEqualTo("fe80::1");
    assertThat(TaskPlacement.host("node-3")).isEqualTo("node-3");
  }

  @Test
  void localRanksAreTheTasksOfOneHostInPartitionOrder() {
    List<String> hosts = List.of("a", "b", "a", "a", "b");
    TaskPlacement third = new TaskPlacement(3, hosts);
    assertThat(third.size()).isEqualTo(5);
    assertThat(third.localRank()).isEqualTo(2);
    assertThat(third.localSize()).isEqualTo(3);
    assertThat(third.env("a", 4242)).isEqualTo(new DistEnv("a", 4242, 3, 5, 2, 3, "spark"));
    assertThat(new TaskPlacement(4, hosts).env("a", 4242)).isEqualTo(new DistEnv("a", 4242, 4, 5, 1, 2, "spark"));
  }
}
