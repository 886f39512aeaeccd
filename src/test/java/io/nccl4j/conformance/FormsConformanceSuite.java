package io.nccl4j.conformance;

import io.nccl4j.DType;
import io.nccl4j.P2POp;
import io.nccl4j.ProcessGroup;
import io.nccl4j.ReduceOp;
import io.nccl4j.Tensor;
import io.nccl4j.testing.TestData;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.DynamicNode;
import org.junit.jupiter.api.TestFactory;

/**
 * The conformance suite's second half: the rooted and list forms (gather and scatter, flat and of
 * lists; all-gather into a list and reduce-scatter from a list, even and uneven; all-to-all of
 * lists; batches of point-to-point operations; the object collectives and the monitored barrier,
 * per world size) on the same matrix, backends and oracle as
 * {@link ConformanceSuite}, whose backends extend this class. Every element of every rank's input
 * has a distinct known value (rank, index); expected results are built from those values alone.
 * Uneven forms give rank r a share of n + r elements.
 */
public abstract class FormsConformanceSuite extends ConformanceSuite {

  /**
   * The counts of the list forms: every count but {@link #LARGE}. They are compositions (coalesced
   * broadcasts and reduces, a flat collective and copies) of collectives this suite runs at every
   * count, LARGE included; what is their own — sizes, offsets, copies in and out — is the same at
   * 1003 elements as at a million, and LARGE made each list case a minute on two cores.
   */
  long[] compositeCounts() {
    return java.util.Arrays.stream(counts()).filter(n -> n != LARGE).toArray();
  }

  /** Rank r's share in the uneven forms: n + r elements (distinct for every rank, even when n = 0). */
  static long share(long n, int r) {
    return n + r;
  }

  /** Rank {@code r}'s values for elements {@code first …} of a flat input, as a host tensor of {@code count}. */
  private static Tensor values(DType t, long count, ReduceOp op, int p, int r, long first) {
    Tensor x = Tensor.empty(count, t);
    TestData.fill(x, op, p, r, first);
    return x;
  }

  // ------------------------------------------------------------------ Gather

  @TestFactory
  Stream<DynamicNode> gatherIntoTensor() {
    return matrix("gatherIntoTensor", false, (p, t, count, op) -> flatten(runner().call(p, pg -> {
      long n = blockCount(count, p);
      List<String> failures = new ArrayList<>();
      int r = pg.rank();
      try (Tensor expected = Tensor.empty(p * n, t)) {
        for (int src = 0; src < p; src++) {
          TestData.fill(expected.slice(src * n, n), null, p, src, 0);
        }
        for (int root : roots(p)) {
          try (Tensor host = TestData.input(t, n, null, p, r); Tensor in = upload(pg, host)) {
            Tensor out = r == root ? pg.zeros(p * n, t) : null;
            try {
              pg.gatherIntoTensor(out, in, root);
              if (out != null) {
                try (Tensor got = download(out)) {
                  check(failures, "root " + root, r, got, expected, 0);
                }
              }
              try (Tensor input = download(in)) {
                check(failures, "input, root " + root, r, input, host, 0);
              }
            } finally {
              if (out != null) {
                out.close();
              }
            }
            // In place on the root: its input is its own block of the output.
            Tensor whole = r == root ? pg.zeros(p * n, t) : null;
            try {
              Tensor mine = whole != null ? whole.chunk(p, root) : in;
              if (whole != null) {
                copyInto(mine, in);
              }
              pg.gatherIntoTensor(whole, mine, root);
              if (whole != null) {
                try (Tensor got = download(whole)) {
                  check(failures, "in place, root " + root, r, got, expected, 0);
                }
              }
            } finally {
              if (whole != null) {
                whole.close();
              }
            }
          }
        }
      }
      return failures;
    })));
  }

  @TestFactory
  Stream<DynamicNode> gatherList() {
    return matrix("gather", false, 1, compositeCounts(), (p, t, n, op) -> flatten(runner().call(p, pg -> {
      List<String> failures = new ArrayList<>();
      int r = pg.rank();
      for (int root : roots(p)) {
        List<Tensor> list = new ArrayList<>();
        try (Tensor host = TestData.input(t, n, null, p, r); Tensor in = upload(pg, host)) {
          if (r == root) {
            for (int i = 0; i < p; i++) {
              list.add(pg.zeros(n, t));
            }
          }
          pg.gather(in, r == root ? list : null, root);
          for (int i = 0; i < list.size(); i++) {
            try (Tensor got = download(list.get(i)); Tensor expected = TestData.input(t, n, null, p, i)) {
              check(failures, "root " + root + ", entry " + i, r, got, expected, 0);
            }
          }
        } finally {
          list.forEach(Tensor::close);
        }
      }
      return failures;
    })));
  }

  // ------------------------------------------------------------------ Scatter

  @TestFactory
  Stream<DynamicNode> scatterTensor() {
    return matrix("scatterTensor", false, (p, t, count, op) -> flatten(runner().call(p, pg -> {
      long n = blockCount(count, p);
      List<String> failures = new ArrayList<>();
      int r = pg.rank();
      for (int root : roots(p)) {
        // The root's input: element i has root's value for index i; rank r gets block r.
        try (Tensor expected = values(t, n, null, p, root, r * n); Tensor out = pg.zeros(n, t)) {
          Tensor host = r == root ? TestData.input(t, p * n, null, p, root) : null;
          Tensor in = host == null ? null : upload(pg, host);
          try {
            pg.scatterTensor(out, in, root);
            try (Tensor got = download(out)) {
              check(failures, "root " + root, r, got, expected, 0);
            }
            if (in != null) {
              try (Tensor input = download(in)) {
                check(failures, "input, root " + root, r, input, host, 0);
              }
              Tensor block = in.chunk(p, root);
              pg.scatterTensor(block, in, root);
              try (Tensor got = download(block)) {
                check(failures, "in place, root " + root, r, got, expected, 0);
              }
            } else {
              pg.scatterTensor(out, null, root);
            }
          } finally {
            if (in != null) {
              in.close();
              host.close();
            }
          }
        }
      }
      return failures;
    })));
  }

  @TestFactory
  Stream<DynamicNode> scatterList() {
    return matrix("scatter", false, 1, compositeCounts(), (p, t, n, op) -> flatten(runner().call(p, pg -> {
      List<String> failures = new ArrayList<>();
      int r = pg.rank();
      for (int root : roots(p)) {
        List<Tensor> list = new ArrayList<>();
        try (Tensor out = pg.zeros(n, t); Tensor expected = values(t, n, null, p, root, r * n)) {
          if (r == root) {
            for (int i = 0; i < p; i++) {
              try (Tensor h = values(t, n, null, p, root, i * n)) {
                list.add(upload(pg, h));
              }
            }
          }
          pg.scatter(out, r == root ? list : List.of(), root);
          try (Tensor got = download(out)) {
            check(failures, "root " + root, r, got, expected, 0);
          }
        } finally {
          list.forEach(Tensor::close);
        }
      }
      return failures;
    })));
  }

  // ------------------------------------------------------------------ AllGather into a list

  @TestFactory
  Stream<DynamicNode> allGatherList() {
    return matrix("allGather (list)", false, 1, compositeCounts(), (p, t, n, op) -> flatten(runner().call(p,
        pg -> {
      List<String> failures = new ArrayList<>();
      int r = pg.rank();
      for (boolean uneven : new boolean[] {false, true}) {
        List<Tensor> list = new ArrayList<>();
        try (Tensor host = TestData.input(t, uneven ? share(n, r) : n, null, p, r); Tensor in = upload(pg, host)) {
          for (int i = 0; i < p; i++) {
            list.add(pg.zeros(uneven ? share(n, i) : n, t));
          }
          pg.allGather(list, in);
          for (int i = 0; i < p; i++) {
            try (Tensor got = download(list.get(i));
                 Tensor expected = TestData.input(t, uneven ? share(n, i) : n, null, p, i)) {
              check(failures, (uneven ? "uneven" : "even") + ", entry " + i, r, got, expected, 0);
            }
          }
          try (Tensor input = download(in)) {
            check(failures, "input", r, input, host, 0);
          }
        } finally {
          list.forEach(Tensor::close);
        }
      }
      return failures;
    })));
  }

  // ------------------------------------------------------------------ ReduceScatter from a list

  @TestFactory
  Stream<DynamicNode> reduceScatterList() {
    return matrix("reduceScatter (list)", true, 1, compositeCounts(), (p, t, n, op) -> {
      double atol = TestData.tolerance(t, op, p);
      List<String> all = new ArrayList<>();
      for (boolean uneven : new boolean[] {false, true}) {
        long[] sizes = new long[p];
        long[] offsets = new long[p];
        long total = 0;
        for (int i = 0; i < p; i++) {
          sizes[i] = uneven ? share(n, i) : n;
          offsets[i] = total;
          total += sizes[i];
        }
        // Entry i of rank r's list is part i of a flat input of the sizes' sum: the oracle reduces that.
        try (Tensor expected = TestData.reduced(t, op, p, total)) {
          all.addAll(flatten(runner().call(p, pg -> {
            List<String> failures = new ArrayList<>();
            int r = pg.rank();
            List<Tensor> hosts = new ArrayList<>();
            List<Tensor> list = new ArrayList<>();
            try (Tensor out = pg.zeros(sizes[r], t)) {
              for (int i = 0; i < p; i++) {
                hosts.add(values(t, sizes[i], op, p, r, offsets[i]));
                list.add(upload(pg, hosts.get(i)));
              }
              pg.reduceScatter(out, list, op);
              try (Tensor got = download(out)) {
                check(failures, uneven ? "uneven" : "even", r, got, expected.slice(offsets[r], sizes[r]), atol);
              }
              for (int i = 0; i < p; i++) {
                try (Tensor input = download(list.get(i))) {
                  check(failures, "input entry " + i, r, input, hosts.get(i), 0);
                }
              }
            } finally {
              list.forEach(Tensor::close);
              hosts.forEach(Tensor::close);
            }
            return failures;
          })));
        }
      }
      return all;
    });
  }

  // ------------------------------------------------------------------ AllToAll of lists

  @TestFactory
  Stream<DynamicNode> allToAllList() {
    return matrix("allToAll (list)", false, 1, compositeCounts(), (p, t, count, op) -> flatten(runner().call(p,
        pg -> {
      long n = blockCount(count, p);
      List<String> failures = new ArrayList<>();
      int r = pg.rank();
      List<Tensor> inputs = new ArrayList<>();
      List<Tensor> outputs = new ArrayList<>();
      try {
        // Rank i's entry j: split(i, j) elements, rank i's values from its offset in a flat input.
        long at = 0;
        for (int j = 0; j < p; j++) {
          long len = split(true, n, r, j);
          try (Tensor h = values(t, len, null, p, r, at)) {
            inputs.add(upload(pg, h));
          }
          at += len;
          outputs.add(pg.zeros(split(true, n, j, r), t));
        }
        pg.allToAll(outputs, inputs);
        for (int src = 0; src < p; src++) {
          long srcOffset = 0;
          for (int j = 0; j < r; j++) {
            srcOffset += split(true, n, src, j);
          }
          try (Tensor got = download(outputs.get(src));
               Tensor expected = values(t, split(true, n, src, r), null, p, src, srcOffset)) {
            check(failures, "from " + src, r, got, expected, 0);
          }
        }
      } finally {
        inputs.forEach(Tensor::close);
        outputs.forEach(Tensor::close);
      }
      return failures;
    })));
  }

  // ------------------------------------------------------------------ batch_isend_irecv

  @TestFactory
  Stream<DynamicNode> batchIsendIrecv() {
    return matrix("batchIsendIrecv", false, 2, compositeCounts(), (p, t, n, op) -> flatten(runner().call(p,
        pg -> {
      List<String> failures = new ArrayList<>();
      int r = pg.rank();
      int right = (r + 1) % p;
      int left = (r + p - 1) % p;
      // Each rank sends right and receives from the left in one batch: a deadlock if not grouped.
      try (Tensor host = TestData.input(t, n, null, p, r); Tensor send = upload(pg, host);
           Tensor recv = pg.zeros(n, t); Tensor expected = TestData.input(t, n, null, p, left)) {
        List<io.nccl4j.Work> works = pg.batchIsendIrecv(List.of(P2POp.isend(send, right), P2POp.irecv(recv, left)));
        works.forEach(io.nccl4j.Work::waitFor);
        try (Tensor got = download(recv)) {
          check(failures, "received from " + left, r, got, expected, 0);
        }
      }
      return failures;
    })));
  }

  // ------------------------------------------------------------------ Objects and the monitored barrier

  /** Rank r's object: distinct and r + 2 characters long, one of them outside ASCII. */
  private static String object(int r) {
    return "é" + "r".repeat(r) + r;
  }

  @TestFactory
  Stream<DynamicNode> objectCollectivesAndMonitoredBarrier() {
    List<DynamicNode> tests = new ArrayList<>();
    for (int p : worldSizes()) {
      tests.add(org.junit.jupiter.api.DynamicTest.dynamicTest("world size " + p, () -> {
        List<String> expected = new ArrayList<>();
        for (int r = 0; r < p; r++) {
          expected.add(object(r));
        }
        int root = p - 1;
        List<String> failures = flatten(runner().call(p, pg -> {
          List<String> f = new ArrayList<>();
          int r = pg.rank();
          io.nccl4j.ObjectCodec<String> utf8 = io.nccl4j.ObjectCodec.utf8();
          pg.monitoredBarrier();
          List<String> all = pg.allGatherObject(object(r), utf8);
          if (!all.equals(expected)) {
            f.add("rank " + r + " allGatherObject: expected " + expected + ", got " + all);
          }
          List<String> gathered = pg.gatherObject(object(r), root, utf8);
          if (!gathered.equals(r == root ? expected : List.of())) {
            f.add("rank " + r + " gatherObject: got " + gathered);
          }
          List<String> sent = r == root ? expected : java.util.Collections.nCopies(p, null);
          List<String> broadcast = pg.broadcastObjectList(sent, root, utf8);
          if (!broadcast.equals(expected)) {
            f.add("rank " + r + " broadcastObjectList: got " + broadcast);
          }
          String mine = pg.scatterObjectList(r == root ? expected : null, root, utf8);
          if (!mine.equals(object(r))) {
            f.add("rank " + r + " scatterObjectList: expected " + object(r) + ", got " + mine);
          }
          pg.monitoredBarrier(java.time.Duration.ofSeconds(60), true);
          return f;
        }));
        org.assertj.core.api.Assertions.assertThat(failures).as("objects, world size %d", p).isEmpty();
      }));
    }
    return tests.stream();
  }
}
