package io.nccl4j.nccl;

import static org.assertj.core.api.Assertions.assertThat;

import io.nccl4j.memory.NativeMemory;
import io.nccl4j.nccl.NcclAnswers.Returns;
import io.nccl4j.nccl.NcclAnswers.Row;
import io.nccl4j.nccl.NcclAnswers.Written;
import io.nccl4j.internal.bind.nccl.NativeSlot;
import io.nccl4j.internal.bind.nccl.NcclApi;
import io.nccl4j.internal.bind.nccl.NcclConfig;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.function.LongSupplier;
import java.util.stream.Stream;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * The fake answers as NCCL does, by the table of what NCCL answers ({@code nccl-answers.md}, read in
 * NCCL's sources of 2.28.9, 2.29.7, 2.30.7 and 2.31.2, each row citing its lines): every NCCL function
 * nccl4j binds has a row, every row a call here, and each call on the fake — on a blocking and on a
 * nonblocking communicator — returns what its row says and writes its out-parameter when its row says.
 * A fake that answered ncclInProgress where NCCL answers ncclSuccess hid the nonblocking split's
 * use after free for a whole release.
 */
@Tag("unit")
class FakeNcclAnswersTest {
  private static final int IN_PROGRESS = 7;
  private static final int BYTES = 64;

  /** The NcclApi methods that are not NCCL functions. */
  private static final Set<String> NOT_NCCL = Set.of("boundVersionCode", "newSlot");

  /**
   * Functions whose nonblocking answer nccl4j cannot meet, so the fake models the blocking one only:
   * they take no configuration and are nonblocking only under NCCL_COMM_BLOCKING=0, an environment
   * variable of NCCL 2.14+, where nccl4j calls ncclCommInitRankConfig instead.
   */
  private static final Map<String, String> BLOCKING_ONLY = Map.of(
      "ncclCommInitRank", "called only where NCCL < 2.14 has neither configurations nor NCCL_COMM_BLOCKING",
      "ncclCommInitAll", "bound, not called by nccl4j");

  /** NCCL's name of an NcclApi method: commInitRank → ncclCommInitRank. */
  private static String ncclName(Method m) {
    return "nccl" + Character.toUpperCase(m.getName().charAt(0)) + m.getName().substring(1);
  }

  private static Set<String> boundFunctions() {
    Set<String> names = new TreeSet<>();
    for (Method m : NcclApi.class.getMethods()) {
      if (!Modifier.isStatic(m.getModifiers()) && !NOT_NCCL.contains(m.getName())) {
        names.add(ncclName(m));
      }
    }
    return names;
  }

  @Test
  void everyBoundFunctionHasARowAndEveryRowABoundFunction() {
    assertThat(NcclAnswers.rows().keySet()).as("rows of nccl-answers.md")
        .containsExactlyInAnyOrderElementsOf(boundFunctions());
  }

  @Test
  void everyRowCitesTheSourcesOfEachVersion() {
    for (Row r : NcclAnswers.rows().values()) {
      assertThat(r.citations()).as(r.function()).containsOnlyKeys(NcclAnswers.VERSIONS);
      r.citations().forEach((version, cite) -> assertThat(cite).as("%s in %s", r.function(), version)
          .matches("absent|[a-z_/]+\\.(cc|h|cu|in|rst)[:0-9,; a-z_/.\\-]*"));
    }
  }

  @Test
  void everyRowHasACallHere() {
    assertThat(CALLS.keySet()).as("functions this test calls on the fake")
        .containsExactlyInAnyOrderElementsOf(NcclAnswers.rows().keySet());
  }

  static Stream<Arguments> modes() {
    List<Arguments> args = new ArrayList<>();
    for (String f : NcclAnswers.rows().keySet()) {
      args.add(Arguments.of(f, false));
      args.add(Arguments.of(f, true));
    }
    return args.stream();
  }

  @ParameterizedTest(name = "{0}, nonblocking={1}")
  @MethodSource("modes")
  void theFakeAnswersAsTheTableSays(String function, boolean nonBlocking) {
    Row row = NcclAnswers.of(function);
    Returns expected = nonBlocking ? row.nonBlocking() : row.blocking();
    if (expected == Returns.NO_COMMUNICATOR) {
      expected = row.blocking();
    }
    if (nonBlocking && BLOCKING_ONLY.containsKey(function)) {
      expected = row.blocking();
    }
    FakeNccl fake = new FakeNccl(new CallLog()).version(23007);
    long comm = communicator(fake, nonBlocking, 2);
    Call call = CALLS.get(function);
    Outcome o = call.on(fake, comm);
    int firstPoll = o.polled != null ? o.polled : o.pollable ? poll(fake, comm) : 0;
    String what = function + (nonBlocking ? " on a nonblocking communicator" : " on a blocking communicator");
    switch (expected) {
      case SUCCESS:
        assertThat(o.rc).as("%s returns", what).isZero();
        assertThat(firstPoll).as("%s leaves no job running", what).isZero();
        break;
      case SUCCESS_JOB_RUNNING:
        assertThat(o.rc).as("%s returns ncclSuccess", what).isZero();
        assertThat(firstPoll).as("%s leaves its job running", what).isEqualTo(IN_PROGRESS);
        break;
      case ASYNC_STATE:
        // What ncclCommGetAsyncError read at the end of the call: the fake's job has not ended then.
        assertThat(o.rc).as("%s returns the asynchronous state", what).isEqualTo(IN_PROGRESS);
        assertThat(firstPoll).as("%s: its job", what).isEqualTo(IN_PROGRESS);
        break;
      case IN_PROGRESS:
        assertThat(o.rc).as("%s returns ncclInProgress", what).isEqualTo(IN_PROGRESS);
        break;
      default:
        throw new AssertionError(expected);
    }
    Written written = nonBlocking && !BLOCKING_ONLY.containsKey(function) ? row.out() : blockingWritten(row.out());
    switch (written) {
      case AT_RETURN:
        assertThat(o.outAtReturn).as("%s writes its out-parameter before it returns", what).isNotZero();
        break;
      case AT_JOB_END:
        assertThat(o.outAtReturn).as("%s: the out-parameter at return", what).isZero();
        while (poll(fake, comm) == IN_PROGRESS) {
          // polls end the job (pollsToComplete)
        }
        assertThat(o.out.getAsLong()).as("%s: the out-parameter once the job ended", what).isNotZero();
        break;
      case NONE:
        assertThat(o.out).as("%s has no out-parameter", what).isNull();
        break;
      default:
        throw new AssertionError(written);
    }
    assertThat(fake.violations()).as(what).isEmpty();
  }

  /** On a blocking communicator the job ends inside the call: what is written at job end is written at return. */
  private static Written blockingWritten(Written w) {
    return w == Written.AT_JOB_END ? Written.AT_RETURN : w;
  }

  private static int poll(FakeNccl fake, long comm) {
    int[] out = new int[1];
    assertThat(fake.commGetAsyncError(comm, out)).isZero();
    return out[0];
  }

  /**
   * At one rank, and for an empty collective, NCCL appends no task: ncclLaunchOneRank runs it on the
   * stream at once (2.30.7 enqueue.cc:3039-3041), an empty one is dropped (:3024), the group has no job
   * (group.cc:866-869) and the call reads ncclSuccess at its end — whatever the communicator's mode.
   */
  @ParameterizedTest(name = "{0}")
  @MethodSource("collectives")
  void aOneRankOrEmptyCollectiveStartsNoJob(String function) {
    for (int nranks : new int[] {1, 2}) {
      FakeNccl fake = new FakeNccl(new CallLog()).version(23007);
      long comm = communicator(fake, true, nranks);
      Outcome o = CALLS.get(function).on(fake, comm);
      if (nranks == 1) {
        assertThat(o.rc()).as("%s at one rank", function).isZero();
        assertThat(poll(fake, comm)).as("%s at one rank leaves no job", function).isZero();
      }
      while (poll(fake, comm) == IN_PROGRESS) {
        // the job the call started at two ranks
      }
      long[] b = {buffer(fake), buffer(fake)};
      int rc = switch (function) {
        case "ncclAllReduce" -> fake.allReduce(b[0], b[1], 0, 7, 0, comm, 0);
        case "ncclReduceScatter" -> fake.reduceScatter(b[0], b[1], 0, 7, 0, comm, 0);
        case "ncclAllGather" -> fake.allGather(b[0], b[1], 0, 7, comm, 0);
        case "ncclBroadcast" -> fake.broadcast(b[0], b[1], 0, 7, 0, comm, 0);
        case "ncclReduce" -> fake.reduce(b[0], b[1], 0, 7, 0, 0, comm, 0);
        case "ncclAlltoAll" -> fake.alltoAll(b[0], b[1], 0, 7, comm, 0);
        case "ncclGather" -> fake.gather(b[0], b[1], 0, 7, 0, comm, 0);
        case "ncclScatter" -> fake.scatter(b[0], b[1], 0, 7, 0, comm, 0);
        default -> throw new AssertionError(function);
      };
      assertThat(rc).as("an empty %s on %d rank(s)", function, nranks).isZero();
      assertThat(poll(fake, comm)).as("an empty %s leaves no job", function).isZero();
      assertThat(fake.violations()).isEmpty();
    }
  }

  static Stream<String> collectives() {
    return Stream.of("ncclAllReduce", "ncclReduceScatter", "ncclAllGather", "ncclBroadcast", "ncclReduce",
        "ncclAlltoAll", "ncclGather", "ncclScatter");
  }

  /** A communicator of rank 0 of {@code nranks}, its init polled to the end (the fake needs no peers). */
  private static long communicator(FakeNccl fake, boolean nonBlocking, int nranks) {
    long[] out = new long[1];
    byte[] id = new byte[128];
    fake.getUniqueId(id);
    fake.commInitRankConfig(out, nranks, id, 0, NcclConfig.DEFAULT.withBlocking(!nonBlocking));
    while (poll(fake, out[0]) == IN_PROGRESS) {
      // the init's job
    }
    return out[0];
  }

  /** What one call returned: its result, its out-parameter then and a way to read it later, and whether it left a communicator to poll. */
  private record Outcome(int rc, long outAtReturn, LongSupplier out, boolean pollable, Integer polled) {
    Outcome(int rc, long outAtReturn, LongSupplier out, boolean pollable) {
      this(rc, outAtReturn, out, pollable, null);
    }

    static Outcome of(int rc) {
      return new Outcome(rc, 0, null, true);
    }

    static Outcome of(int rc, long[] out) {
      long now = out[0];
      return new Outcome(rc, now, () -> out[0], true);
    }

    static Outcome of(int rc, int[] out) {
      long now = out[0] == 0 ? 0 : 1;
      return new Outcome(rc, now, () -> 1, true);
    }

    static Outcome of(int rc, NativeSlot slot) {
      return new Outcome(rc, slot.get(), slot::get, true);
    }

    Outcome noCommunicator() {
      return new Outcome(rc, outAtReturn, out, false);
    }

    /** The call made a communicator of its own: {@code state} is what polling that one first answered. */
    Outcome withPoll(int state) {
      return new Outcome(rc, outAtReturn, out, true, state);
    }
  }

  @FunctionalInterface
  private interface Call {
    Outcome on(FakeNccl fake, long comm);
  }

  private static long buffer(FakeNccl fake) {
    long[] p = new long[1];
    assertThat(fake.memAlloc(p, BYTES)).isZero();
    return p[0];
  }

  private static long registered(FakeNccl fake, long comm) {
    long[] h = new long[1];
    assertThat(fake.commRegister(comm, buffer(fake), BYTES, h)).isZero();
    return h[0];
  }

  private static long window(FakeNccl fake, long comm) {
    try (NativeSlot w = fake.newSlot()) {
      fake.commWindowRegister(comm, buffer(fake), BYTES, w, NcclApi.WIN_COLL_SYMMETRIC);
      while (poll(fake, comm) == IN_PROGRESS) {
        // the registration's job, on a nonblocking communicator
      }
      return w.get();
    }
  }

  /** One call per NCCL function, each with what it needs made first. */
  private static final Map<String, Call> CALLS = Map.ofEntries(
      Map.entry("ncclGetVersion", (f, c) -> {
        int[] v = new int[1];
        return Outcome.of(f.getVersion(v), v).noCommunicator();
      }),
      Map.entry("ncclGetUniqueId", (f, c) -> {
        byte[] id = new byte[128];
        int rc = f.getUniqueId(id);
        long any = 0;
        for (byte b : id) {
          any |= b;
        }
        return new Outcome(rc, any == 0 ? 0 : 1, () -> 1, false);
      }),
      Map.entry("ncclCommInitRank", (f, c) -> {
        long[] out = new long[1];
        byte[] id = new byte[128];
        f.getUniqueId(id);
        return Outcome.of(f.commInitRank(out, 1, id, 0), out).noCommunicator();
      }),
      Map.entry("ncclCommInitRankConfig", (f, c) -> {
        long[] out = new long[1];
        byte[] id = new byte[128];
        f.getUniqueId(id);
        int rc = f.commInitRankConfig(out, 1, id, 0, NcclConfig.DEFAULT.withBlocking(!f.isNonBlocking(c)));
        return Outcome.of(rc, out).withPoll(poll(f, out[0]));
      }),
      Map.entry("ncclCommInitAll", (f, c) -> {
        long[] out = new long[1];
        return Outcome.of(f.commInitAll(out, new int[] {0}), out).noCommunicator();
      }),
      Map.entry("ncclCommSplit", (f, c) -> {
        NativeSlot s = f.newSlot();
        return Outcome.of(f.commSplit(c, 0, 0, s, null), s);
      }),
      Map.entry("ncclCommShrink", (f, c) -> {
        NativeSlot s = f.newSlot();
        long[] two = new long[1];
        byte[] id = new byte[128];
        f.getUniqueId(id);
        // A shrink of its own two-rank communicator, which the test's communicator has no part in.
        f.commInitRankConfig(two, 2, id, 0, NcclConfig.DEFAULT.withBlocking(!f.isNonBlocking(c)));
        while (poll(f, two[0]) == IN_PROGRESS) {
          // its init
        }
        int rc = f.commShrink(two[0], new int[] {1}, s, null, 0);
        int first = poll(f, two[0]);
        return new Outcome(rc, s.get(), () -> {
          while (poll(f, two[0]) == IN_PROGRESS) {
            // the shrink's job
          }
          return s.get();
        }, false).withPoll(first);
      }),
      Map.entry("ncclCommFinalize", (f, c) -> Outcome.of(f.commFinalize(c))),
      Map.entry("ncclCommDestroy", (f, c) -> Outcome.of(f.commDestroy(c)).noCommunicator()),
      Map.entry("ncclCommAbort", (f, c) -> Outcome.of(f.commAbort(c)).noCommunicator()),
      Map.entry("ncclCommGetAsyncError", (f, c) -> {
        int[] e = {-1};
        int rc = f.commGetAsyncError(c, e);
        return new Outcome(rc, e[0] == -1 ? 0 : 1, () -> 1, true);
      }),
      Map.entry("ncclCommCount", (f, c) -> {
        int[] n = new int[1];
        return Outcome.of(f.commCount(c, n), n);
      }),
      Map.entry("ncclCommCuDevice", (f, c) -> {
        int[] d = {-1};
        int rc = f.commCuDevice(c, d);
        return new Outcome(rc, d[0] == -1 ? 0 : 1, () -> 1, true);
      }),
      Map.entry("ncclCommUserRank", (f, c) -> {
        int[] r = {-1};
        int rc = f.commUserRank(c, r);
        return new Outcome(rc, r[0] == -1 ? 0 : 1, () -> 1, true);
      }),
      Map.entry("ncclCommMemStats", (f, c) -> {
        f.memStat(3, 4096);
        long[] out = new long[1];
        return Outcome.of(f.commMemStats(c, 3, out), out);
      }),
      Map.entry("ncclMemAlloc", (f, c) -> {
        long[] p = new long[1];
        return Outcome.of(f.memAlloc(p, BYTES), p).noCommunicator();
      }),
      Map.entry("ncclMemFree", (f, c) -> Outcome.of(f.memFree(buffer(f))).noCommunicator()),
      Map.entry("ncclCommRegister", (f, c) -> {
        long[] h = new long[1];
        return Outcome.of(f.commRegister(c, buffer(f), BYTES, h), h);
      }),
      Map.entry("ncclCommDeregister", (f, c) -> Outcome.of(f.commDeregister(c, registered(f, c)))),
      Map.entry("ncclCommWindowRegister", (f, c) -> {
        NativeSlot w = f.newSlot();
        return Outcome.of(f.commWindowRegister(c, buffer(f), BYTES, w, NcclApi.WIN_COLL_SYMMETRIC), w);
      }),
      Map.entry("ncclCommWindowDeregister", (f, c) -> Outcome.of(f.commWindowDeregister(c, window(f, c)))),
      Map.entry("ncclGetErrorString", (f, c) -> new Outcome(f.getErrorString(4) == null ? 4 : 0, 0, null, false)),
      Map.entry("ncclGetLastError", (f, c) -> new Outcome(f.getLastError(0) == null ? 4 : 0, 0, null, false)),
      Map.entry("ncclRedOpCreatePreMulSum", (f, c) -> {
        long scalar = NativeMemory.allocate(4);
        NativeMemory.putFloat(scalar, 0.5f);
        int[] op = new int[1];
        int rc = f.redOpCreatePreMulSum(op, scalar, 7, c);
        NativeMemory.free(scalar);
        return Outcome.of(rc, op);
      }),
      Map.entry("ncclRedOpDestroy", (f, c) -> {
        long scalar = NativeMemory.allocate(4);
        int[] op = new int[1];
        f.redOpCreatePreMulSum(op, scalar, 7, c);
        NativeMemory.free(scalar);
        return Outcome.of(f.redOpDestroy(op[0], c));
      }),
      Map.entry("ncclAllReduce", (f, c) -> Outcome.of(f.allReduce(buffer(f), buffer(f), 16, 7, 0, c, 0))),
      Map.entry("ncclReduceScatter", (f, c) -> Outcome.of(f.reduceScatter(buffer(f), buffer(f), 16, 7, 0, c, 0))),
      Map.entry("ncclAllGather", (f, c) -> Outcome.of(f.allGather(buffer(f), buffer(f), 16, 7, c, 0))),
      Map.entry("ncclBroadcast", (f, c) -> Outcome.of(f.broadcast(buffer(f), buffer(f), 16, 7, 0, c, 0))),
      Map.entry("ncclReduce", (f, c) -> Outcome.of(f.reduce(buffer(f), buffer(f), 16, 7, 0, 0, c, 0))),
      Map.entry("ncclAlltoAll", (f, c) -> Outcome.of(f.alltoAll(buffer(f), buffer(f), 16, 7, c, 0))),
      Map.entry("ncclGather", (f, c) -> Outcome.of(f.gather(buffer(f), buffer(f), 16, 7, 0, c, 0))),
      Map.entry("ncclScatter", (f, c) -> Outcome.of(f.scatter(buffer(f), buffer(f), 16, 7, 0, c, 0))),
      Map.entry("ncclSend", (f, c) -> Outcome.of(f.send(buffer(f), 16, 7, 0, c, 0))),
      Map.entry("ncclRecv", (f, c) -> Outcome.of(f.recv(buffer(f), 16, 7, 0, c, 0))),
      Map.entry("ncclGroupStart", (f, c) -> {
        int rc = f.groupStart();
        f.groupEnd();
        return Outcome.of(rc).noCommunicator();
      }),
      Map.entry("ncclGroupEnd", (f, c) -> {
        f.groupStart();
        f.allReduce(buffer(f), buffer(f), 16, 7, 0, c, 0);
        return Outcome.of(f.groupEnd());
      }));
}
