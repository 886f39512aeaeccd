package io.nccl4j.internal.transport.shm;

import static org.assertj.core.api.Assertions.assertThat;

import io.nccl4j.internal.transport.SharedMemory;
import io.nccl4j.internal.transport.TransferTag;
import io.nccl4j.TransportTimeoutException;
import io.nccl4j.internal.transport.tcp.TcpTransport;
import io.nccl4j.internal.transport.threads.LocalFabric;
import io.nccl4j.memory.MemoryResource;
import io.nccl4j.memory.NativeMemory;
import io.nccl4j.store.HashStore;
import io.nccl4j.testing.TestTime;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.function.IntFunction;
import org.assertj.core.api.Assertions;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Every wait of a window has the collective's deadline, leaving included: a rank that stays inside a
 * window (frozen by SIGSTOP or a debugger, descheduled, paused) makes the others fail when the deadline
 * passes, naming it, instead of waiting for as long as it stays — over the threads' windows and over
 * the processes' (here ranks as threads, each with its own mappings of every segment).
 */
@Tag("multirank")
class WindowDeadlinesTest {
  private static final int SIZE = 3;
  private static final int INSIDE = 1;
  /** The window's deadline, from when the ranks open it: room to open it (the processes agree on their segments). */
  private static final Duration DEADLINE = TestTime.seconds(3);

  @TempDir
  Path dir;

  /** A rank's windows and the buffer it publishes in them (for processes, in its segment). */
  private record Rank(SharedMemory windows, long buffer) {}

  /** Each rank's windows: the threads' fabric, or its own transport and mappings of the segments. */
  private IntFunction<Rank> ranks(String kind, long heapBuffer) {
    if (kind.equals("threads")) {
      LocalFabric fabric = new LocalFabric(SIZE);
      return rank -> new Rank(fabric.endpoint(rank).sharedMemory(), heapBuffer);
    }
    HashStore store = new HashStore(Duration.ofSeconds(60));
    return rank -> {
      TcpTransport t = new TcpTransport(rank, SIZE, store, "127.0.0.1", Duration.ofSeconds(60));
      MemoryResource arena = HostSharedMemory.attach(t, dir, 64L << 20, Duration.ofSeconds(60), "one-host");
      return new Rank(t.sharedMemory(), arena.allocate(64));
    };
  }

  @ParameterizedTest(name = "{0}")
  @ValueSource(strings = {"threads", "processes"})
  void aRankThatStaysInsideAWindowTimesTheOthersOutWhenTheyLeaveNamingIt(String kind) throws Exception {
    TransferTag tag = new TransferTag(TransferTag.Channel.COLLECTIVE, io.nccl4j.OpType.ALLREDUCE, 7);
    long buf = NativeMemory.allocate(64);
    IntFunction<Rank> make = ranks(kind, buf);
    ExecutorService pool = Executors.newFixedThreadPool(SIZE);
    CountDownLatch othersDone = new CountDownLatch(SIZE - 1);
    try {
      List<Rank> ranks = new ArrayList<>();
      for (int r = 0; r < SIZE; r++) {
        ranks.add(make.apply(r));
      }
      long deadline = System.nanoTime() + DEADLINE.toNanos();
      List<Future<Object[]>> outcome = new ArrayList<>();
      for (int rank = 0; rank < SIZE; rank++) {
        int r = rank;
        outcome.add(pool.submit(() -> {
          SharedMemory.Window w = ranks.get(r).windows().open(tag, "test", 64, deadline,
              ranks.get(r).buffer());
          if (r == INSIDE) {
            // Stays inside until the others have given up: what a frozen process does.
            othersDone.await();
            return new Object[] {Assertions.catchThrowable(w::close), 0L};
          }
          boolean before = ranks.get(r).windows().peersMayStillWrite();
          Throwable e = Assertions.catchThrowable(w::close);
          long late = System.nanoTime() - deadline;
          othersDone.countDown();
          return new Object[] {e, late, before, ranks.get(r).windows().peersMayStillWrite()};
        }));
      }
      List<Throwable> timedOut = new ArrayList<>();
      for (int r = 0; r < SIZE; r++) {
        // A guard against a wait without a deadline: it must fail here, not hang the build.
        Object[] o = outcome.get(r).get(TestTime.scaledSeconds(60), TimeUnit.SECONDS);
        Throwable e = (Throwable) o[0];
        if (r == INSIDE) {
          assertThat(e).as("rank %d, which left last: the window was given up on", r).isNotNull();
          continue;
        }
        // The first to time out aborts the window; the other times out too, or sees that abort first.
        assertThat(e).as("rank %d", r).isNotNull();
        if (e instanceof TransportTimeoutException) {
          timedOut.add(e);
          assertThat((long) o[1]).as("rank %d failed after its deadline (ns past it)", r).isNotNegative();
        } else {
          assertThat(e).as("rank %d", r).hasMessageContaining("failed inside the window of " + tag);
        }
        // The backend keeps such a collective's memory: rank 1 may still write it.
        assertThat(o[2]).as("rank %d: peers may still write its buffers, before it left", r).isEqualTo(false);
        assertThat(o[3]).as("rank %d: peers may still write its buffers, after it left early", r).isEqualTo(true);
      }
      assertThat(timedOut).as("the ranks that timed out themselves").isNotEmpty()
          .allSatisfy(t -> assertThat(t).hasMessageContaining("waiting for rank " + INSIDE)
              .hasMessageContaining("to leave its window of " + tag));
    } finally {
      pool.shutdownNow();
      NativeMemory.free(buf);
    }
  }

  /**
   * A rank that arrives after a peer gave up waiting for it (the peer's deadline passed while this one was slow or
   * not scheduled) completes the arrival count, but must not enter the window: the peer has gone on to fail, and
   * would never leave it. Before, the last arrival ignored the abort and waited in the window's exit for the peers
   * that had left — what a 4-process sweep under a load of 30 showed.
   */
  @ParameterizedTest(name = "{0}")
  @ValueSource(strings = {"threads", "processes"})
  void aRankArrivingAfterAPeerGaveUpDoesNotEnterTheWindow(String kind) throws Exception {
    long buf = NativeMemory.allocate(64);
    IntFunction<Rank> make = ranks(kind, buf);
    TransferTag tag = new TransferTag(TransferTag.Channel.COLLECTIVE, io.nccl4j.OpType.ALLREDUCE, 3);
    ExecutorService pool = Executors.newFixedThreadPool(SIZE);
    try {
      List<Rank> ranks = new ArrayList<>();
      for (int r = 0; r < SIZE; r++) {
        ranks.add(make.apply(r));
      }
      // A first window every rank opens and leaves (the processes agree on their segments in it).
      TransferTag first = new TransferTag(TransferTag.Channel.COLLECTIVE, io.nccl4j.OpType.ALLREDUCE, 2);
      long any = System.nanoTime() + TestTime.seconds(60).toNanos();
      List<Future<Object>> opened = new ArrayList<>();
      for (Rank me : ranks) {
        opened.add(pool.submit(() -> {
          me.windows().open(first, "test", 64, any, me.buffer()).close();
          return null;
        }));
      }
      for (Future<Object> f : opened) {
        f.get(TestTime.scaledSeconds(60), TimeUnit.SECONDS);
      }
      long late = System.nanoTime() + TestTime.seconds(60).toNanos();
      long soon = System.nanoTime() + TestTime.seconds(3).toNanos();
      // Ranks 1 and 2 arrive and give up at their deadline; rank 0 arrives only then.
      List<Future<Throwable>> early = new ArrayList<>();
      for (int r = 1; r < SIZE; r++) {
        Rank me = ranks.get(r);
        early.add(pool.submit(() -> Assertions.catchThrowable(() -> me.windows().open(tag, "test", 64, soon,
            me.buffer()))));
      }
      // The first to give up names rank 0; the other gives up with it, or sees its abort first.
      List<Throwable> gaveUp = new ArrayList<>();
      for (Future<Throwable> f : early) {
        gaveUp.add(f.get(TestTime.scaledSeconds(60), TimeUnit.SECONDS));
      }
      assertThat(gaveUp).doesNotContainNull().anySatisfy(t -> assertThat(t)
          .isInstanceOf(TransportTimeoutException.class).hasMessageContaining("waiting for rank 0"));
      Rank zero = ranks.get(0);
      Throwable e = pool.submit(() -> Assertions.catchThrowable(() -> zero.windows().open(tag, "test", 64, late,
          zero.buffer()))).get(TestTime.scaledSeconds(60), TimeUnit.SECONDS);
      assertThat(e).as("rank 0, arriving last after its peers gave up").isNotNull()
          .hasMessageContaining("gave up waiting for " + tag);
    } finally {
      pool.shutdownNow();
      NativeMemory.free(buf);
    }
  }
}
