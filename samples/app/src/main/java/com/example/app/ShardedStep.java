package com.example.app;

import io.nccl4j.DType;
import io.nccl4j.LocalCluster;
import io.nccl4j.Padding;
import io.nccl4j.ProcessGroup;
import io.nccl4j.ReduceOp;
import io.nccl4j.ShardLayout;
import io.nccl4j.Tensor;
import io.nccl4j.Work;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * One optimizer step of ZeRO-style sharded data parallelism. The model's 11 parameters (a count the
 * world size does not divide) live in two buckets of 6 and 5, each padded to a multiple of the world
 * size ({@link ShardLayout}, {@link Padding}); rank r owns shard r of each bucket. The step
 * reduce-scatters the gradients bucket by bucket — both issued before either is waited for, so that
 * the second bucket's transfer does not wait for the host to see the first one finish — updates only
 * the shards it owns, all-gathers the updated shards into whole buckets and trims the padding, so
 * that every rank ends with the same parameters.
 */
public final class ShardedStep {
  static final int[] BUCKET_SIZES = {6, 5};
  static final double LEARNING_RATE = 0.25;

  private ShardedStep() {}

  /** What one rank ends the step with. */
  record RankResult(float[] parameters, List<float[]> gradientShards) {}

  /** Parameter {@code i} before the step, the same on every rank. */
  static double initialParameter(int i) {
    return i;
  }

  /** Rank {@code rank}'s gradient of parameter {@code i}: (rank + 1)·(i + 1). */
  static double gradient(int rank, int i) {
    return (rank + 1) * (i + 1);
  }

  static List<RankResult> step(int worldSize) {
    return LocalCluster.call(worldSize, pg -> {
      List<Bucket> buckets = new ArrayList<>();
      try {
        int first = 0;
        for (int size : BUCKET_SIZES) {
          buckets.add(new Bucket(pg, first, size));
          first += size;
        }
        List<Work> reductions = new ArrayList<>();
        for (Bucket b : buckets) {
          reductions.add(pg.reduceScatterTensorAsync(b.gradShard, b.grads, ReduceOp.AVG));
        }
        for (Work w : reductions) {
          w.waitFor();
        }
        List<Work> gathers = new ArrayList<>();
        for (Bucket b : buckets) {
          Tensor own = b.params.chunk(pg.size(), pg.rank());   // a view: updated and gathered in place
          for (long j = 0; j < own.count(); j++) {
            own.setDouble(j, own.getDouble(j) - LEARNING_RATE * b.gradShard.getDouble(j));
          }
          gathers.add(pg.allGatherIntoTensorAsync(b.params, own));
        }
        for (Work w : gathers) {
          w.waitFor();
        }
        float[] parameters = new float[first];
        List<float[]> shards = new ArrayList<>();
        for (Bucket b : buckets) {
          b.params = Padding.trim(b.params, b.layout.logicalCount());
          System.arraycopy(b.params.toFloatArray(), 0, parameters, b.first, (int) b.layout.logicalCount());
          shards.add(b.gradShard.toFloatArray());
        }
        return new RankResult(parameters, shards);
      } finally {
        for (Bucket b : buckets) {
          b.close();
        }
      }
    });
  }

  /** One bucket on one rank: its padded gradients and parameters, and the gradient shard it owns. */
  private static final class Bucket implements AutoCloseable {
    final int first;
    final ShardLayout layout;
    final Tensor grads;
    final Tensor gradShard;
    Tensor params;

    Bucket(ProcessGroup pg, int first, int size) {
      this.first = first;
      this.layout = new ShardLayout(size, pg.size());
      try (Tensor g = pg.empty(size, DType.FLOAT32); Tensor w = pg.empty(size, DType.FLOAT32)) {
        for (int i = 0; i < size; i++) {
          g.setDouble(i, gradient(pg.rank(), first + i));
          w.setDouble(i, initialParameter(first + i));
        }
        // Gradients are padded with AVG's identity (0), which leaves the reduced values alone; the
        // parameters' padding (SUM's identity, 0) is trimmed after the all-gather.
        grads = Padding.pad(g, layout, ReduceOp.AVG, pg.allocator());
        params = Padding.pad(w, layout, ReduceOp.SUM, pg.allocator());
      }
      gradShard = pg.empty(layout.shardSize(), DType.FLOAT32);
    }

    @Override
    public void close() {
      grads.close();
      gradShard.close();
      params.close();
    }
  }

  public static void main(String[] args) {
    List<RankResult> ranks = step(4);
    for (int r = 0; r < ranks.size(); r++) {
      RankResult result = ranks.get(r);
      System.out.println("rank " + r + " gradient shards " + Arrays.toString(result.gradientShards().get(0)) + " "
          + Arrays.toString(result.gradientShards().get(1)) + ", parameters " + Arrays.toString(result.parameters()));
    }
  }
}
