package io.nccl4j.nccl;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Locale;
import java.util.Map;

/**
 * What NCCL answers, read from the table {@code nccl-answers.md} beside this class's package in the
 * test resources: for every NCCL function nccl4j binds, what a successful call returns on a blocking
 * and on a nonblocking communicator, and when its out-parameter is written — each row citing the
 * NCCL source lines, for 2.28.9, 2.29.7, 2.30.7 and 2.31.2, it was read in. {@link FakeNccl} answers
 * by this table, and {@code FakeNcclAnswersTest} holds the fake and the table together.
 */
final class NcclAnswers {
  /** What a successful call returns (the table's vocabulary). */
  enum Returns {
    /** ncclSuccess, and nothing it started still runs on the communicator. */
    SUCCESS,
    /** ncclSuccess while a job it started still runs; the job's end is seen by polling ncclCommGetAsyncError. */
    SUCCESS_JOB_RUNNING,
    /** What ncclCommGetAsyncError reads at the end of the call: ncclInProgress while its job runs. */
    ASYNC_STATE,
    /** ncclInProgress whenever it started a job. */
    IN_PROGRESS,
    /** The function takes no communicator: the blocking column says what it returns. */
    NO_COMMUNICATOR
  }

  /** When the out-parameter of a call on a nonblocking communicator is written. */
  enum Written {
    AT_RETURN,
    /** NULL at return; NCCL's job thread writes it when the job ends. */
    AT_JOB_END,
    NONE
  }

  /** One row of the table. */
  record Row(String function, Returns blocking, Returns nonBlocking, Written out, String remark,
      Map<String, String> citations) {}

  /** The versions the table was read in, its last four columns. */
  static final String[] VERSIONS = {"v2.28.9-1", "v2.29.7-1", "v2.30.7-1", "2.31.2"};

  private static final String RESOURCE = "nccl-answers.md";
  private static final Map<String, Row> ROWS = load();

  private NcclAnswers() {}

  /** Every row, by NCCL function name, in the table's order. */
  static Map<String, Row> rows() {
    return ROWS;
  }

  /** The row of {@code function}. @throws IllegalStateException when the table has none */
  static Row of(String function) {
    Row r = ROWS.get(function);
    if (r == null) {
      throw new IllegalStateException(function + " has no row in " + RESOURCE + ": read what NCCL answers in its"
          + " sources and add one");
    }
    return r;
  }

  private static Map<String, Row> load() {
    String text;
    try (InputStream in = NcclAnswers.class.getResourceAsStream(RESOURCE)) {
      if (in == null) {
        throw new IllegalStateException(RESOURCE + " is not on the test class path");
      }
      text = new String(in.readAllBytes(), StandardCharsets.UTF_8);
    } catch (IOException e) {
      throw new IllegalStateException("cannot read " + RESOURCE, e);
    }
    Map<String, Row> rows = new LinkedHashMap<>();
    for (String line : text.split("\n")) {
      if (!line.startsWith("| nccl")) {
        continue;
      }
      String[] cells = line.split("\\|", -1);
      // "", function, blocking, nonblocking, out, remark, four versions, ""
      if (cells.length != 11) {
        throw new IllegalStateException(RESOURCE + ": a row needs 9 cells, got " + (cells.length - 2) + ": " + line);
      }
      Map<String, String> cites = new LinkedHashMap<>();
      for (int v = 0; v < VERSIONS.length; v++) {
        cites.put(VERSIONS[v], cells[6 + v].trim());
      }
      Row row = new Row(cells[1].trim(), returns(cells[2]), returns(cells[3]), written(cells[4]), cells[5].trim(),
          Collections.unmodifiableMap(cites));
      if (rows.put(row.function(), row) != null) {
        throw new IllegalStateException(RESOURCE + ": two rows for " + row.function());
      }
    }
    return Collections.unmodifiableMap(rows);
  }

  private static Returns returns(String cell) {
    return Returns.valueOf(cell.trim().toUpperCase(Locale.ROOT).replace('-', '_'));
  }

  private static Written written(String cell) {
    return Written.valueOf(cell.trim().toUpperCase(Locale.ROOT).replace('-', '_'));
  }
}
