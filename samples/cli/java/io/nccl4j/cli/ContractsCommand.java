package io.nccl4j.cli;

import com.fasterxml.jackson.core.type.TypeReference;
import io.nccl4j.cli.Contracts.Row;
import io.nccl4j.cli.Contracts.Status;
import io.nccl4j.cli.bench.Json;
import io.nccl4j.cli.bench.SampleException;
import io.nccl4j.cli.bench.Table;
import java.io.PrintStream;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;

/** {@code ./nccl4j contracts}: the five exact contracts, checked on every rank. */
@Command(name = "contracts", mixinStandardHelpOptions = true,
    description = {"Checks the chapter's five exact contracts on every rank.",
        "exact-sum-equivalence, wrong-shard-order-rejected, wrong-reduction-op-rejected, "
            + "padding-and-trim-equivalence, nondivisible-without-padding-rejected (int64 data).",
        "Exit code 0 only when every rank row passes."})
final class ContractsCommand implements Callable<Integer> {
  @Mixin
  CommonOptions common = new CommonOptions();

  @Mixin
  GroupOption group = new GroupOption();

  @Option(names = "--count", defaultValue = "20", description = "Elements of the exact contracts. Default: ${DEFAULT-VALUE}.")
  long count;

  @Option(names = "--nondivisible-count", defaultValue = "1003",
      description = "Elements of the padding and rejection contracts. Default: ${DEFAULT-VALUE}.")
  long nondivisible;

  @Option(names = "--json", paramLabel = "FILE", description = "Also write the results as JSON.")
  Path json;

  @Override
  public Integer call() {
    return run(System.out) ? 0 : 1;
  }

  /** Runs and prints; true when nothing failed. */
  boolean run(PrintStream out) {
    if (count < 1 || nondivisible < 1) {
      throw new SampleException(2, "--count and --nondivisible-count must be >= 1");
    }
    BackendChoice backend = common.choose();
    int world = common.effectiveWorldSize();
    int p = group.size(world);
    Groups.Gathered<List<Row>> g = Groups.call(common, backend, world,
        group.around(pg -> Contracts.run(pg, count, nondivisible)), new TypeReference<List<Row>>() { });
    if (!g.reporter()) {
      // A launched rank other than 0: rank 0 reports for everyone; exit status from this rank's rows.
      return g.mine().stream().filter(java.util.Objects::nonNull).flatMap(List::stream)
          .noneMatch(r -> r.status() == Status.FAIL);
    }
    List<List<Row>> perRank = group.members(g.all());
    out.println(backend.describe());
    out.printf("%s, int64, count %d, non-divisible count %d%n%n", group.describe(world), count, nondivisible);
    Summary s = summarize(perRank);
    s.table.print(out);
    for (String d : s.notes) {
      out.println(d);
    }
    out.println(s.passed + " passed, " + s.failed + " failed");
    if (json != null) {
      Map<String, Object> doc = new LinkedHashMap<>();
      doc.put("backend", backend.name());
      doc.put("worldSize", world);
      if (group.given()) {
        doc.put("group", group.members(java.util.stream.IntStream.range(0, world).boxed().toList()));
      }
      doc.put("count", count);
      doc.put("nondivisibleCount", nondivisible);
      doc.put("rows", perRank.stream().flatMap(List::stream).toList());
      doc.put("passed", s.passed);
      doc.put("failed", s.failed);
      Json.write(json, doc);
    }
    return s.failed == 0;
  }

  static final class Summary {
    final Table table = new Table("contract", "rank rows", "result");
    final List<String> notes = new ArrayList<>();
    int passed;
    int failed;
  }

  static Summary summarize(List<List<Row>> perRank) {
    Summary s = new Summary();
    for (String name : Contracts.NAMES) {
      int rows = 0;
      int pass = 0;
      int fail = 0;
      String skipReason = null;
      for (List<Row> rankRows : perRank) {
        for (Row row : rankRows) {
          if (!row.contract().equals(name)) {
            continue;
          }
          rows++;
          if (row.status() == Status.PASS) {
            pass++;
          } else if (row.status() == Status.FAIL) {
            fail++;
            s.notes.add("  " + name + ", rank " + row.rank() + ": " + row.detail());
          } else {
            skipReason = row.detail();
          }
        }
      }
      String result = fail > 0 ? "FAIL" : pass == rows && rows > 0 ? "PASS" : "SKIP (" + skipReason + ")";
      s.table.row(name, rows, result);
      s.passed += pass;
      s.failed += fail;
    }
    return s;
  }
}
