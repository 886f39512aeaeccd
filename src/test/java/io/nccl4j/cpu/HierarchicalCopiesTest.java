package io.nccl4j.cpu;

import static org.assertj.core.api.Assertions.assertThat;

import io.nccl4j.DType;
import io.nccl4j.LocalCluster;
import io.nccl4j.Tensor;
import io.nccl4j.Work;
import io.nccl4j.internal.transport.shm.ShmThreadsCluster;
import io.nccl4j.testing.TestData;
import io.nccl4j.testing.TestTime;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * The hierarchical Broadcast (the root's rail across hosts, then a copy within each host) from every
 * root, and AllGather (each rail across hosts, then copies within each host), with ranks as threads on two hosts ({@code rank % 2}: {0, 2} and {1, 3}; {0, 2, 4} and
 * {1, 3, 5}), from tensors in the shared segments and from elsewhere: every rank ends with the
 * root's — or every rank's — distinct values in their places, and nothing else.
 */
@Tag("multirank")
class HierarchicalCopiesTest {
  @TempDir
  static Path segments;

  static Stream<Arguments> cases() {
    List<Arguments> out = new ArrayList<>();
    for (int p : new int[] {4, 6}) {
      for (int root = 0; root < p; root++) {
        for (long count : new long[] {1, 1001, 300_007}) {
          out.add(Arguments.of(p, root, count));
        }
      }
    }
    return out.stream();
  }

  private static long value(int r, long i) {
    return TestData.mix(((long) r << 40) ^ i);
  }

  @ParameterizedTest(name = "{0} ranks, root {1}, {2} int64")
  @MethodSource("cases")
  void everyRankGetsTheRootsValues(int p, int root, long count) {
    List<String> wrong = LocalCluster.of(p).timeout(TestTime.seconds(60)).strictMemory(true)
        .backend(new ShmThreadsCluster(segments, 64L << 20, rank -> "host-" + rank % 2, CpuOptions.fromEnvironment()))
        .call(pg -> {
          List<String> bad = new ArrayList<>();
          for (boolean fromGroup : new boolean[] {true, false}) {
            try (Tensor t = fromGroup ? pg.empty(count, DType.INT64) : Tensor.empty(count, DType.INT64)) {
              for (long i = 0; i < count; i++) {
                t.setLong(i, value(pg.rank(), i));
              }
              Work w = pg.broadcastAsync(t, root);
              w.waitFor();
              assertThat(w.stats().orElseThrow().algorithm()).isEqualTo("hierarchical");
              for (long i = 0; i < count && bad.size() < 3; i++) {
                if (t.getLong(i) != value(root, i)) {
                  bad.add("rank " + pg.rank() + (fromGroup ? "" : " (tensor from elsewhere)") + ": element " + i
                      + " is " + t.getLong(i) + ", expected " + value(root, i));
                }
              }
            }
          }
          return String.join("; ", bad);
        });
    assertThat(String.join("", wrong)).isEmpty();
  }

  static Stream<Arguments> gathers() {
    List<Arguments> out = new ArrayList<>();
    for (int p : new int[] {4, 6}) {
      for (long q : new long[] {1, 1001, 100_003}) {
        out.add(Arguments.of(p, q));
      }
    }
    return out.stream();
  }

  @ParameterizedTest(name = "{0} ranks, {1} int64 each")
  @MethodSource("gathers")
  void allGatherPutsEveryRanksValuesInTheirPlaces(int p, long q) {
    List<String> wrong = LocalCluster.of(p).timeout(TestTime.seconds(60)).strictMemory(true)
        .backend(new ShmThreadsCluster(segments, 64L << 20, rank -> "host-" + rank % 2, CpuOptions.fromEnvironment()))
        .call(pg -> {
          List<String> bad = new ArrayList<>();
          for (boolean fromGroup : new boolean[] {true, false}) {
            for (boolean inPlace : new boolean[] {false, true}) {
              try (Tensor out = fromGroup ? pg.empty(q * p, DType.INT64) : Tensor.empty(q * p, DType.INT64);
                   Tensor own = fromGroup ? pg.empty(q, DType.INT64) : Tensor.empty(q, DType.INT64)) {
                Tensor in = inPlace ? out.chunk(p, pg.rank()) : own;
                for (long i = 0; i < q; i++) {
                  in.setLong(i, value(pg.rank(), i));
                }
                Work w = pg.allGatherIntoTensorAsync(out, in);
                w.waitFor();
                assertThat(w.stats().orElseThrow().algorithm()).isEqualTo("hierarchical");
                for (int r = 0; r < p; r++) {
                  for (long i = 0; i < q && bad.size() < 3; i++) {
                    if (out.getLong(r * q + i) != value(r, i)) {
                      bad.add("rank " + pg.rank() + (fromGroup ? "" : ", tensors from elsewhere")
                          + (inPlace ? ", in place" : "") + ": block " + r + " element " + i + " is "
                          + out.getLong(r * q + i) + ", expected " + value(r, i));
                    }
                  }
                }
              }
            }
          }
          return String.join("; ", bad);
        });
    assertThat(String.join("", wrong)).isEmpty();
  }
}
