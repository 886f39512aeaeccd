package io.nccl4j;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.catchThrowable;

import io.nccl4j.testing.TestTime;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * The object collectives over the built-in codecs: every rank's object distinct and of a different
 * length (the empty one and multi-byte UTF-8 included), decoded exactly on every rank that should
 * have it; hostile lengths refused before allocation; the codecs' own refusals.
 */
@Tag("multirank")
class ObjectCollectivesTest {
  /** Rank r's object: distinct, r·3 characters long, with a two-byte and a four-byte character. */
  private static String object(int r) {
    StringBuilder sb = new StringBuilder();
    for (int i = 0; i < r; i++) {
      sb.append("é").append(r).append("\uD83D\uDE00");
    }
    return sb.toString();
  }

  private static List<String> objects(int p) {
    List<String> all = new ArrayList<>();
    for (int r = 0; r < p; r++) {
      all.add(object(r));
    }
    return all;
  }

  @Test
  void allGatherAndGatherObjectGiveEveryRanksObjectInRankOrder() {
    int p = 4;
    List<List<List<String>>> got = LocalCluster.of(p).call(pg -> List.of(
        pg.allGatherObject(object(pg.rank()), ObjectCodec.utf8()),
        pg.gatherObject(object(pg.rank()), 3, ObjectCodec.utf8())));
    for (int r = 0; r < p; r++) {
      assertThat(got.get(r).get(0)).as("all-gather on rank %d", r).containsExactlyElementsOf(objects(p));
      assertThat(got.get(r).get(1)).as("gather on rank %d", r).isEqualTo(r == 3 ? objects(p) : List.of());
    }
  }

  @Test
  void broadcastObjectListAndScatterObjectListFromARootThatIsNotZero() {
    int p = 3;
    List<String> sent = List.of("first", "", object(2), "fourth-" + object(1));
    List<List<Object>> got = LocalCluster.of(p).call(pg -> {
      List<String> mine = pg.rank() == 1 ? sent : Arrays.asList(null, null, null, null);
      List<String> scatterInput = pg.rank() == 2 ? List.of("to 0", object(2), "") : null;
      return List.of(pg.broadcastObjectList(mine, 1, ObjectCodec.utf8()),
          pg.scatterObjectList(scatterInput, 2, ObjectCodec.utf8()));
    });
    List<String> scattered = List.of("to 0", object(2), "");
    for (int r = 0; r < p; r++) {
      assertThat(got.get(r).get(0)).as("broadcast on rank %d", r).isEqualTo(sent);
      assertThat(got.get(r).get(1)).as("scatter on rank %d", r).isEqualTo(scattered.get(r));
    }
  }

  @Test
  void bytesTravelExactlyAndAreNotShared() {
    List<List<byte[]>> got = LocalCluster.of(2).call(pg -> {
      byte[] mine = new byte[5 + pg.rank()];
      for (int i = 0; i < mine.length; i++) {
        mine[i] = (byte) (31 * pg.rank() + i - 128);
      }
      List<byte[]> all = pg.allGatherObject(mine, ObjectCodec.bytes());
      mine[0] = 0;
      return all;
    });
    for (int r = 0; r < 2; r++) {
      for (int src = 0; src < 2; src++) {
        byte[] b = got.get(r).get(src);
        assertThat(b).hasSize(5 + src);
        for (int i = 0; i < b.length; i++) {
          assertThat(b[i]).as("rank %d, from %d, byte %d", r, src, i).isEqualTo((byte) (31 * src + i - 128));
        }
      }
    }
  }

  /** A UTF-8 codec that accepts at most {@code max} bytes. */
  private static ObjectCodec<String> capped(int max) {
    ObjectCodec<String> utf8 = ObjectCodec.utf8();
    return new ObjectCodec<>() {
      @Override
      public byte[] encode(String value) {
        return utf8.encode(value);
      }

      @Override
      public String decode(byte[] bytes) {
        return utf8.decode(bytes);
      }

      @Override
      public int maxEncodedBytes() {
        return max;
      }
    };
  }

  @Test
  void aLengthAbovePeersLimitIsRefusedBeforeAllocating() {
    List<Throwable> errors = LocalCluster.of(2).timeout(TestTime.seconds(3)).call(pg -> catchThrowable(() ->
        pg.allGatherObject(pg.rank() == 1 ? "ten bytes!" : "ok", capped(pg.rank() == 0 ? 4 : 100))));
    assertThat(errors.get(0)).isInstanceOf(BackendException.class).hasMessage("rank 0: rank 1 announced an object of"
        + " 10 bytes; expected 0..4 (the codec's maxEncodedBytes)");
    assertThat(errors.get(1)).as("rank 1 waits for rank 0, which left").isInstanceOf(BackendException.class);
  }

  @Test
  void anObjectAboveTheLimitIsRefusedWhereItIsEncoded() {
    List<Throwable> errors = LocalCluster.of(1).call(pg -> catchThrowable(() ->
        pg.allGatherObject("ten bytes!", capped(4))));
    assertThat(errors.get(0)).isInstanceOf(IllegalArgumentException.class).hasMessage("rank 0: String encoded as 10"
        + " bytes, more than the codec's limit of 4 (maxEncodedBytes)");
  }

  @Test
  void scatterObjectListChecksTheSourcesListBeforeAnyCollective() {
    List<Throwable> errors = LocalCluster.of(2).timeout(TestTime.seconds(2)).call(pg -> catchThrowable(() ->
        pg.scatterObjectList(pg.rank() == 0 ? List.of("only one") : null, 0, ObjectCodec.utf8())));
    assertThat(errors.get(0)).isInstanceOf(UsageException.class).hasMessage("ProcessGroupNCCL::scatter: Incorrect"
        + " input list size 1. Input list size should be 2, same as size of the process group. (rank 0)");
    assertThat(errors.get(1)).as("rank 1 never saw rank 0's mistake: it waits for the size and fails")
        .isInstanceOf(BackendException.class);
  }

  @Test
  void theCodecsRefuseNullAndInvalidUtf8() {
    assertThatThrownBy(() -> ObjectCodec.utf8().decode(new byte[] {(byte) 0xC3})).isInstanceOf(
        IllegalArgumentException.class).hasMessage("expected UTF-8, got 1 bytes that are not:"
            + " java.nio.charset.MalformedInputException: Input length = 1");
    assertThatThrownBy(() -> ObjectCodec.utf8().encode(null)).isInstanceOf(IllegalArgumentException.class)
        .hasMessage("the UTF-8 codec cannot encode null");
    assertThatThrownBy(() -> ObjectCodec.bytes().encode(null)).isInstanceOf(IllegalArgumentException.class)
        .hasMessage("the byte[] codec cannot encode null");
    assertThat(ObjectCodec.utf8().encode("é")).isEqualTo("é".getBytes(StandardCharsets.UTF_8));
    assertThat(ObjectCodec.utf8().maxEncodedBytes()).isEqualTo(64 << 20);
  }
}
