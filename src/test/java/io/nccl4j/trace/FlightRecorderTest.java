package io.nccl4j.trace;

import static io.nccl4j.testing.RankTensors.rankData;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.catchThrowable;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.nccl4j.CollectiveTimeoutException;
import io.nccl4j.DType;
import io.nccl4j.LocalCluster;
import io.nccl4j.ReduceOp;
import io.nccl4j.Tensor;
import io.nccl4j.testing.TestTime;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The flight recorder: what it records, its ring, its dumps (on failure and on demand), and the
 * analysis of every rank's dump that names the first collective where ranks diverge.
 */
@Tag("multirank")
class FlightRecorderTest {
  private static final Duration TIMEOUT = TestTime.seconds(60);

  @Test
  void recordsEachOperationWithItsArgumentsStateAndTimes() {
    List<List<FlightRecorder.Entry>> all = LocalCluster.of(2).timeout(TIMEOUT).call(pg -> {
      try (Tensor x = rankData(pg, 6, DType.FLOAT32, 100); Tensor g = pg.zeros(12, DType.FLOAT32);
          Tensor s = rankData(pg, 3, DType.INT64, 100)) {
        pg.allReduce(x, ReduceOp.MAX);
        pg.allGatherIntoTensor(g, x);
        pg.broadcast(x, 1);
        if (pg.rank() == 0) {
          pg.send(s, 1);
        } else {
          pg.recv(s, 0);
        }
        return pg.flightRecorder().entries();
      }
    });
    for (int r = 0; r < 2; r++) {
      List<FlightRecorder.Entry> es = all.get(r);
      assertThat(es).extracting(e -> e.op).containsExactly("ALLREDUCE", "_ALLGATHER_BASE", "BROADCAST",
          r == 0 ? "SEND" : "RECV");
      assertThat(es).extracting(e -> e.seq).startsWith(1L, 2L, 3L);
      assertThat(es).extracting(e -> e.state).containsOnly("completed");
      FlightRecorder.Entry ar = es.get(0);
      assertThat(ar.numelIn).isEqualTo(6);
      assertThat(ar.numelOut).isEqualTo(6);
      assertThat(ar.dtype).isEqualTo("float32");
      assertThat(ar.reduceOp).isEqualTo("MAX");
      assertThat(es.get(1).numelOut).isEqualTo(12);
      assertThat(es.get(2).peer).isEqualTo(1);
      assertThat(es.get(3).pointToPoint).isTrue();
      assertThat(es.get(3).peer).isEqualTo(1 - r);
      for (FlightRecorder.Entry e : es) {
        assertThat(e.enqueuedMicros).isPositive();
        assertThat(e.startedMicros).isGreaterThanOrEqualTo(e.enqueuedMicros);
        assertThat(e.completedMicros).isGreaterThanOrEqualTo(e.startedMicros);
        assertThat(e.error).isNull();
      }
    }
  }

  @Test
  void theRingKeepsTheMostRecentOperations() {
    FlightRecorder small = new FlightRecorder(3);
    LocalCluster.of(1).timeout(TIMEOUT).run(pg -> {
      pg.addObserver(small);
      try (Tensor t = rankData(pg, 2, DType.INT32, 100)) {
        for (int i = 0; i < 5; i++) {
          pg.allReduce(t, ReduceOp.SUM);
        }
      }
    });
    assertThat(small.capacity()).isEqualTo(3);
    assertThat(small.entries()).extracting(e -> e.seq).containsExactly(3L, 4L, 5L);
    assertThat(FlightRecorder.DEFAULT_CAPACITY).isEqualTo(2000);
    assertThatThrownBy(() -> new FlightRecorder(0)).hasMessage("flight recorder capacity must be >= 1, got 0");
  }

  @Test
  void aTimeoutDumpsTheFailingRankAndTheAnalysisNamesTheMissingCollective(@TempDir Path dir) throws IOException {
    CountDownLatch rank0Failed = new CountDownLatch(1);
    // The timeout under test; the two collectives before it must fit in it on a busy machine too, so it scales
    // (TestTime) with the dump's Timeout(ms) that quotes it.
    Duration timeout = TestTime.scaled(Duration.ofMillis(600));
    catchThrowable(() -> LocalCluster.of(2).timeout(timeout).run(pg -> {
      pg.dumpFlightRecorderOnFailure(dir);
      try (Tensor t = rankData(pg, 4, DType.INT64, 100)) {
        pg.allReduce(t, ReduceOp.SUM);
        pg.broadcast(t, 0);
        if (pg.rank() == 1) {
          // Rank 1 "forgets" collective #3; once rank 0 timed out it dumps on demand.
          rank0Failed.await(TestTime.scaledSeconds(60), TimeUnit.SECONDS);
          pg.dumpFlightRecorder(dir, "dumped on demand");
          return;
        }
        Throwable e = catchThrowable(() -> pg.allReduce(t, ReduceOp.MAX));
        rank0Failed.countDown();
        assertThat(e).isInstanceOf(CollectiveTimeoutException.class);
      }
    }));
    JsonNode rank0 = new ObjectMapper().readTree(dir.resolve("rank0.json").toFile());
    assertThat(rank0.path("rank").asInt()).isZero();
    assertThat(rank0.path("worldSize").asInt()).isEqualTo(2);
    assertThat(rank0.path("backend").asText()).isEqualTo("cpu");
    assertThat(rank0.path("reason").asText()).startsWith("Watchdog caught collective operation timeout");
    assertThat(rank0.path("capacity").asInt()).isEqualTo(2000);
    JsonNode last = rank0.path("entries").get(2);
    assertThat(last.path("seq").asLong()).isEqualTo(3);
    assertThat(last.path("state").asText()).isEqualTo("failed");
    assertThat(last.path("error").asText()).contains("Timeout(ms)=" + timeout.toMillis());
    assertThat(Files.exists(dir.resolve("rank1.json"))).isTrue();

    TraceAnalysis.Result r = TraceAnalysis.analyze(TraceAnalysis.load(dir));
    assertThat(r.consistent()).isFalse();
    assertThat(r.lines()).contains("ranks with a dump: 2 of 2", "first divergence at collective #3:",
        "  ranks [1] never issued collective #3 (ALLREDUCE on rank 0)");
    assertThat(r.lines()).anyMatch(l -> l.startsWith("rank 0: last collective #3 ALLREDUCE (failed); dumped because:"
        + " Watchdog caught"));
    assertThat(r.lines()).contains("rank 1: last collective #2 BROADCAST (completed); dumped because: dumped on demand");
  }

  @Test
  void differingArgumentsAreDumpedByBothRanksAndNamedByTheAnalysis(@TempDir Path dir) throws IOException {
    catchThrowable(() -> LocalCluster.of(2).timeout(TIMEOUT).run(pg -> {
      pg.dumpFlightRecorderOnFailure(dir);
      try (Tensor t = rankData(pg, pg.rank() == 1 ? 9 : 8, DType.FLOAT32, 100)) {
        pg.barrier();
        pg.allReduce(t, ReduceOp.SUM); // 8 elements on rank 0, 9 on rank 1
      }
    }));
    assertThat(dir.resolve("rank0.json")).exists();
    assertThat(dir.resolve("rank1.json")).exists();
    TraceAnalysis.Result r = TraceAnalysis.analyze(TraceAnalysis.load(dir));
    assertThat(r.consistent()).isFalse();
    assertThat(r.lines()).contains("first divergence at collective #2:",
        "  rank 0 and rank 1 differ: numelIn 8 vs 9, numelOut 8 vs 9");
  }

  @Test
  void onDemandDumpsOfAHealthyJobAreConsistent(@TempDir Path dir) throws IOException {
    LocalCluster.of(3).timeout(TIMEOUT).run(pg -> {
      try (Tensor t = rankData(pg, 5, DType.INT32, 100)) {
        pg.allReduce(t, ReduceOp.SUM);
        pg.barrier();
      }
      assertThat(pg.dumpFlightRecorder(dir, "checkpoint")).isEqualTo(dir.resolve("rank" + pg.rank() + ".json"));
    });
    TraceAnalysis.Result r = TraceAnalysis.analyze(TraceAnalysis.load(dir));
    assertThat(r.consistent()).isTrue();
    assertThat(r.lines()).last().isEqualTo(
        "consistent: every rank issued the same collectives #1..2 and completed them");
  }

  private static void write(Path dir, int rank, int world, String entries) throws IOException {
    Files.writeString(dir.resolve("rank" + rank + ".json"), "{\"version\":1,\"rank\":" + rank + ",\"worldSize\":"
        + world + ",\"backend\":\"nccl\",\"reason\":\"\",\"entries\":[" + entries + "]}");
  }

  private static String entry(long seq, String op, long numel, String state) {
    return "{\"seq\":" + seq + ",\"op\":\"" + op + "\",\"pointToPoint\":false,\"numelIn\":" + numel
        + ",\"numelOut\":" + numel + ",\"dtype\":\"Float\",\"reduceOp\":\"SUM\",\"peer\":-1,\"state\":\"" + state
        + "\"}";
  }

  @Test
  void aCollectiveEveryRankIssuedButNotEveryRankFinishedIsWhereTheJobIsStuck(@TempDir Path dir)
      throws IOException {
    write(dir, 0, 2, entry(1, "ALLREDUCE", 4, "completed") + "," + entry(2, "ALLREDUCE", 4, "started"));
    write(dir, 1, 2, entry(1, "ALLREDUCE", 4, "completed") + "," + entry(2, "ALLREDUCE", 4, "scheduled"));
    TraceAnalysis.Result r = TraceAnalysis.analyze(TraceAnalysis.load(dir));
    assertThat(r.consistent()).isFalse();
    assertThat(r.lines()).last().isEqualTo(
        "no divergence; first collective not completed everywhere: #2 ALLREDUCE: rank 0 started, rank 1 scheduled");
  }

  @Test
  void wrappedRingsAreComparedWhereTheyOverlapAndAMissingRankIsSaid(@TempDir Path dir) throws IOException {
    // Rank 0's ring kept #3..#5, rank 1's #1..#4; rank 2 left no dump.
    write(dir, 0, 3, entry(3, "ALLREDUCE", 4, "completed") + "," + entry(4, "BROADCAST", 4, "completed") + ","
        + entry(5, "ALLREDUCE", 4, "started"));
    write(dir, 1, 3, entry(1, "ALLREDUCE", 4, "completed") + "," + entry(2, "ALLREDUCE", 4, "completed") + ","
        + entry(3, "ALLREDUCE", 4, "completed") + "," + entry(4, "BROADCAST", 4, "completed"));
    TraceAnalysis.Result r = TraceAnalysis.analyze(TraceAnalysis.load(dir));
    assertThat(r.lines()).contains("ranks with a dump: 2 of 3 (no dump from ranks [2])",
        "first divergence at collective #5:", "  ranks [1] never issued collective #5 (ALLREDUCE on rank 0)");
  }

  @Test
  void anEmptyDirectoryIsNotConsistentAndSaysThatNoRankDumped(@TempDir Path dir) throws IOException {
    TraceAnalysis.Result r = TraceAnalysis.analyze(TraceAnalysis.load(dir));
    assertThat(r.consistent()).isFalse();
    assertThat(r.lines()).containsExactly("no flight-recorder dumps (rank*.json): no rank wrote one. A rank writes"
        + " rank<r>.json at its group's first failure (a timeout, an abort, a mismatch, a peer's failure) when"
        + " NCCL4J_FLIGHT_RECORDER_DIR names this directory, or when the program asks (pg.dumpFlightRecorder): a run"
        + " where nothing failed leaves none");
  }

  @Test
  void aRankWithoutADumpIsNamedWhereEveryRankWithOneWaitsInACollectiveItNeverIssued(@TempDir Path dir)
      throws IOException {
    // Ranks 0..2 completed #1 and wait in #2; rank 3 left no dump (it skipped #2 and went on, or exited).
    for (int r = 0; r < 3; r++) {
      write(dir, r, 4, entry(1, "ALLREDUCE", 4, "completed") + "," + entry(2, "ALLREDUCE", 8, r == 1 ? "started"
          : "failed"));
    }
    TraceAnalysis.Result r = TraceAnalysis.analyze(TraceAnalysis.load(dir));
    assertThat(r.consistent()).isFalse();
    assertThat(r.lines()).contains("ranks with a dump: 3 of 4 (no dump from ranks [3])",
        "first divergence at collective #2:", "  ranks [3] never issued collective #2 as far as the dumps show: they"
            + " left no dump, and every rank that did issued it (ALLREDUCE on rank 0) and none completed it (a rank"
            + " killed in it leaves no dump either: the reasons above say which)");
  }

  @Test
  void aRankWithoutADumpIsNotNamedForACollectiveSomeRankCompleted(@TempDir Path dir) throws IOException {
    // Rank 0 completed #2 (a broadcast's root may): nothing says that rank 2 never issued it.
    write(dir, 0, 3, entry(1, "BROADCAST", 4, "completed") + "," + entry(2, "BROADCAST", 4, "completed"));
    write(dir, 1, 3, entry(1, "BROADCAST", 4, "completed") + "," + entry(2, "BROADCAST", 4, "failed"));
    TraceAnalysis.Result r = TraceAnalysis.analyze(TraceAnalysis.load(dir));
    assertThat(r.lines()).noneMatch(l -> l.contains("never issued"));
    assertThat(r.lines()).last().isEqualTo(
        "no divergence; first collective not completed everywhere: #2 BROADCAST: rank 1 failed");
  }
}
