package io.nccl4j.cli.bench;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import javax.xml.parsers.DocumentBuilderFactory;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.w3c.dom.Document;
import org.w3c.dom.Element;
import org.w3c.dom.NodeList;

/** The charts that bench and sweep write: sizes read as powers of two, and the SVG stays small. */
@Tag("unit")
public class ChartsTest {

  /** A sweep of 1 KiB to 1 GiB in powers of two, three lines, each point a distinct value, with whiskers. */
  private static List<Charts.Line> sweep() {
    List<Charts.Line> lines = new ArrayList<>();
    for (int m = 0; m < 3; m++) {
      List<Double> x = new ArrayList<>();
      List<Double> y = new ArrayList<>();
      List<Double> top = new ArrayList<>();
      for (int e = 10; e <= 30; e++) {
        x.add((double) (1L << e));
        y.add(1e-4 * Math.pow(e - 9, 3) * (m + 1) + 1.234_567_89e-5 * e);
        top.add(y.get(y.size() - 1) * 1.37);
      }
      lines.add(new Charts.Line("line " + m, x, y, top));
    }
    return lines;
  }

  private static void saveSweep(Path base) {
    Charts.save(Charts.chart("AllReduce bandwidth", "size S (bytes)", "GB/s", true, true, sweep()), base);
  }

  @Test
  void sizesAreLabelledAsPowersOfTwoAndTheSvgStaysSmall(@TempDir Path dir) throws Exception {
    saveSweep(dir.resolve("sweep"));
    Path svg = dir.resolve("sweep.svg");

    List<String> xLabels = texts(svg, "x-ticks");
    assertThat(xLabels).as("x-axis labels of a sweep from 1 KiB to 1 GiB").containsExactly("1 KiB", "4 KiB",
        "16 KiB", "64 KiB", "256 KiB", "1 MiB", "4 MiB", "16 MiB", "64 MiB", "256 MiB", "1 GiB");
    // 63 points, each a line vertex, a marker and a whisker: about 40 bytes each at 0.1 px, plus a few KB of
    // axes and text. Glyph outlines or unrounded coordinates would take hundreds of KB.
    int points = 3 * 21;
    long bound = 6_000 + 100L * points;
    assertThat(Files.size(svg)).as("bytes of an SVG of %d points (bound %d)", points, bound).isLessThan(bound);
    assertThat(Files.readString(svg)).as("coordinates rounded to 0.1 px").doesNotContainPattern("d=\"[^\"]*\\d\\.\\d\\d");
  }

  @Test
  void theYAxisOfALogChartIsLabelledAtDecadesAsPlainNumbers(@TempDir Path dir) throws Exception {
    saveSweep(dir.resolve("sweep"));
    // y spans 0.00022 to about 3.8 (whiskers included): decades 0.0001 to 10.
    assertThat(texts(dir.resolve("sweep.svg"), "y-ticks")).containsExactly("0.0001", "0.001", "0.01", "0.1", "1",
        "10");
  }

  @Test
  void aLinearChartIsLabelledInStepsOfOneTwoOrFive(@TempDir Path dir) throws Exception {
    List<Double> steps = List.of(0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0);
    List<Double> mib = List.of(0.0, 3.0, 17.0, 33.0, 34.0, 19.0, 4.0, 0.5);
    Charts.save(Charts.chart("memory", "step", "allocated MiB", false, false,
        List.of(new Charts.Line("pooled", steps, mib, null))), dir.resolve("memory"));
    assertThat(texts(dir.resolve("memory.svg"), "x-ticks")).containsExactly("0", "2", "4", "6", "8");
    // 0 to 34 in about six steps: 34 / 6 = 5.7, so steps of 10.
    assertThat(texts(dir.resolve("memory.svg"), "y-ticks")).containsExactly("0", "10", "20", "30", "40");
  }

  /** The text of every {@code <text>} inside the SVG's group of the given class, in document order. */
  private static List<String> texts(Path svg, String groupClass) throws Exception {
    DocumentBuilderFactory f = DocumentBuilderFactory.newInstance();
    f.setFeature("http://apache.org/xml/features/nonvalidating/load-external-dtd", false);
    Document doc = f.newDocumentBuilder().parse(svg.toFile());
    List<String> out = new ArrayList<>();
    NodeList groups = doc.getElementsByTagName("g");
    for (int i = 0; i < groups.getLength(); i++) {
      Element g = (Element) groups.item(i);
      if (groupClass.equals(g.getAttribute("class"))) {
        NodeList t = g.getElementsByTagName("text");
        for (int j = 0; j < t.getLength(); j++) {
          out.add(t.item(j).getTextContent());
        }
      }
    }
    return out;
  }
}
