package io.nccl4j.cli.bench;

import java.io.PrintStream;
import java.util.ArrayList;
import java.util.List;

/** A plain-text table with aligned columns separated by " | ". */
public final class Table {
  private final List<String[]> rows = new ArrayList<>();

  public Table(String... header) {
    rows.add(header);
  }

  public Table row(Object... cells) {
    String[] s = new String[cells.length];
    for (int i = 0; i < cells.length; i++) {
      s[i] = String.valueOf(cells[i]);
    }
    rows.add(s);
    return this;
  }

  public void print(PrintStream out) {
    int cols = rows.get(0).length;
    int[] width = new int[cols];
    for (String[] r : rows) {
      for (int c = 0; c < cols && c < r.length; c++) {
        width[c] = Math.max(width[c], r[c].length());
      }
    }
    for (String[] r : rows) {
      StringBuilder sb = new StringBuilder();
      for (int c = 0; c < cols; c++) {
        String cell = c < r.length ? r[c] : "";
        sb.append(c == 0 ? "" : " | ");
        sb.append(c == cols - 1 ? cell : String.format("%-" + width[c] + "s", cell));
      }
      out.println(sb);
    }
  }
}
