package com.example.app;

import static org.assertj.core.api.Assertions.assertThat;

import io.nccl4j.ShardLayout;
import java.util.List;
import org.junit.jupiter.api.Test;

class ShardedStepTest {
  @Test
  void bucketsOfSixAndFivePadToEightOnFourRanks() {
    ShardLayout first = new ShardLayout(ShardedStep.BUCKET_SIZES[0], 4);
    ShardLayout second = new ShardLayout(ShardedStep.BUCKET_SIZES[1], 4);

    assertThat(first.shardSize()).isEqualTo(2);
    assertThat(first.paddingCount()).isEqualTo(2);
    assertThat(second.shardSize()).isEqualTo(2);
    assertThat(second.paddingCount()).isEqualTo(3);
    // rank 3 owns only padding in both buckets, rank 2 one real element of the second
    assertThat(first.logicalShardCount(3)).isZero();
    assertThat(second.logicalShardCount(2)).isEqualTo(1);
  }

  @Test
  void eachRankOwnsTheMeanGradientOfItsShardOfEachBucket() {
    List<ShardedStep.RankResult> ranks = ShardedStep.step(4);

    // mean over 4 ranks of (r + 1)·(i + 1) = 2.5·(i + 1); padding reduces to 0
    assertThat(ranks.get(0).gradientShards()).containsExactly(new float[] {2.5f, 5f}, new float[] {17.5f, 20f});
    assertThat(ranks.get(1).gradientShards()).containsExactly(new float[] {7.5f, 10f}, new float[] {22.5f, 25f});
    assertThat(ranks.get(2).gradientShards()).containsExactly(new float[] {12.5f, 15f}, new float[] {27.5f, 0f});
    assertThat(ranks.get(3).gradientShards()).containsExactly(new float[] {0f, 0f}, new float[] {0f, 0f});
  }

  @Test
  void everyRankEndsWithTheSameUpdatedParametersWithoutPadding() {
    List<ShardedStep.RankResult> ranks = ShardedStep.step(4);

    // i − 0.25·2.5·(i + 1) = 0.375·i − 0.625
    float[] expected = {-0.625f, -0.25f, 0.125f, 0.5f, 0.875f, 1.25f, 1.625f, 2f, 2.375f, 2.75f, 3.125f};
    assertThat(ranks).hasSize(4);
    for (ShardedStep.RankResult rank : ranks) {
      assertThat(rank.parameters()).containsExactly(expected);
    }
  }

  @Test
  void threeRanksShardTheSameBucketsDifferently() {
    List<ShardedStep.RankResult> ranks = ShardedStep.step(3);

    // mean gradient 2·(i + 1); buckets 6 = 3·2 (no padding) and 5 → 6 (one padding element on rank 2)
    assertThat(ranks.get(2).gradientShards()).containsExactly(new float[] {10f, 12f}, new float[] {22f, 0f});
    // i − 0.25·2·(i + 1) = 0.5·i − 0.5
    float[] expected = {-0.5f, 0f, 0.5f, 1f, 1.5f, 2f, 2.5f, 3f, 3.5f, 4f, 4.5f};
    for (ShardedStep.RankResult rank : ranks) {
      assertThat(rank.parameters()).containsExactly(expected);
    }
  }

  @Test
  void mainPrintsRankZerosShardsAndTheParameters() {
    List<String> lines = ConsoleCapture.stdoutOf(() -> ShardedStep.main(new String[0]));

    assertThat(lines).hasSize(4);
    assertThat(lines.get(0)).isEqualTo("rank 0 gradient shards [2.5, 5.0] [17.5, 20.0], parameters "
        + "[-0.625, -0.25, 0.125, 0.5, 0.875, 1.25, 1.625, 2.0, 2.375, 2.75, 3.125]");
  }
}
