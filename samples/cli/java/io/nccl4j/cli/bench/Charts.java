package io.nccl4j.cli.bench;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.knowm.xchart.BitmapEncoder;
import org.knowm.xchart.XYChart;
import org.knowm.xchart.XYChartBuilder;
import org.knowm.xchart.XYSeries;
import org.knowm.xchart.style.markers.SeriesMarkers;

/** Charts of the samples: the PNG drawn with XChart, the SVG written by {@link SvgChart}. */
public final class Charts {
  private Charts() {}

  /** One line of a chart; {@code whiskerTop} (optional) draws a vertical whisker at each x. */
  public record Line(String name, List<Double> x, List<Double> y, List<Double> whiskerTop) {}

  /** What a chart shows; {@code logX} means x is a byte size, drawn on a log2 scale and labelled 1 KiB, 1 MiB. */
  record Spec(String title, String xTitle, String yTitle, boolean logX, boolean logY, List<Line> lines) {}

  public static Spec chart(String title, String xTitle, String yTitle, boolean logX, boolean logY, List<Line> lines) {
    return new Spec(title, xTitle, yTitle, logX, logY, lines);
  }

  /**
   * The PNG's chart. Byte sizes are plotted as their log2 on a linear axis, so that XChart's ticks fall on whole
   * powers of two and read 1 KiB, 64 KiB, 1 MiB (its own log axis ticks at powers of ten: 1000, 1E6).
   */
  static XYChart xchart(Spec spec) {
    XYChart chart = new XYChartBuilder().width(SvgChart.WIDTH).height(SvgChart.HEIGHT).title(spec.title())
        .xAxisTitle(spec.xTitle()).yAxisTitle(spec.yTitle()).build();
    chart.getStyler().setYAxisLogarithmic(spec.logY());
    if (spec.logX()) {
      chart.getStyler().setxAxisTickLabelsFormattingFunction(v -> {
        long e = Math.round(v);
        return Math.abs(v - e) < 1e-9 && e >= 0 && e < 63 ? Sizes.format(1L << e) : "";
      });
    }
    chart.getStyler().setLegendPosition(org.knowm.xchart.style.Styler.LegendPosition.InsideNW);
    chart.getStyler().setChartBackgroundColor(java.awt.Color.WHITE);
    int k = 0;
    for (Line l : spec.lines()) {
      java.awt.Color color = java.awt.Color.decode(SvgChart.PALETTE[k++ % SvgChart.PALETTE.length]);
      List<Double> x = spec.logX() ? log2(l.x()) : l.x();
      XYSeries s = chart.addSeries(l.name(), x, l.y());
      s.setMarker(SeriesMarkers.CIRCLE);
      s.setLineColor(color);
      s.setMarkerColor(color);
      if (l.whiskerTop() != null) {
        for (int i = 0; i < x.size(); i++) {
          XYSeries w = chart.addSeries(l.name() + " P95 " + i, List.of(x.get(i), x.get(i)),
              List.of(l.y().get(i), l.whiskerTop().get(i)));
          w.setMarker(SeriesMarkers.NONE);
          w.setLineColor(color);
          w.setShowInLegend(false);
        }
      }
    }
    return chart;
  }

  private static List<Double> log2(List<Double> xs) {
    List<Double> out = new ArrayList<>(xs.size());
    xs.forEach(v -> out.add(Math.log(v) / Math.log(2)));
    return out;
  }

  /** Writes {@code base}.png and {@code base}.svg. */
  public static void save(Spec spec, Path base) {
    try {
      Files.createDirectories(base.toAbsolutePath().getParent());
      BitmapEncoder.saveBitmap(xchart(spec), base.toString(), BitmapEncoder.BitmapFormat.PNG);
      Files.writeString(Path.of(base + ".svg"), SvgChart.render(spec), StandardCharsets.UTF_8);
    } catch (IOException e) {
      throw new SampleException(2, "cannot write chart " + base + ": " + e.getMessage());
    }
  }
}
