package io.nccl4j.samples;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.knowm.xchart.BitmapEncoder;
import org.knowm.xchart.VectorGraphicsEncoder;
import org.knowm.xchart.XYChart;
import org.knowm.xchart.XYChartBuilder;
import org.knowm.xchart.XYSeries;
import org.knowm.xchart.style.markers.SeriesMarkers;

/** Charts of the samples, drawn with XChart, saved as PNG and SVG. */
final class Charts {
  private Charts() {}

  /** One line of a chart; {@code whiskerTop} (optional) draws a vertical whisker at each x. */
  record Line(String name, List<Double> x, List<Double> y, List<Double> whiskerTop) {}

  static XYChart chart(String title, String xTitle, String yTitle, boolean logX, boolean logY, List<Line> lines) {
    XYChart chart = new XYChartBuilder().width(900).height(560).title(title).xAxisTitle(xTitle).yAxisTitle(yTitle)
        .build();
    chart.getStyler().setXAxisLogarithmic(logX);
    chart.getStyler().setYAxisLogarithmic(logY);
    chart.getStyler().setLegendPosition(org.knowm.xchart.style.Styler.LegendPosition.InsideNW);
    chart.getStyler().setChartBackgroundColor(java.awt.Color.WHITE);
    java.awt.Color[] palette = {new java.awt.Color(31, 119, 180), new java.awt.Color(214, 39, 40),
        new java.awt.Color(44, 160, 44), new java.awt.Color(255, 127, 14), new java.awt.Color(148, 103, 189),
        new java.awt.Color(140, 86, 75), new java.awt.Color(127, 127, 127), new java.awt.Color(23, 190, 207)};
    int k = 0;
    for (Line l : lines) {
      java.awt.Color color = palette[k++ % palette.length];
      XYSeries s = chart.addSeries(l.name(), l.x(), l.y());
      s.setMarker(SeriesMarkers.CIRCLE);
      s.setLineColor(color);
      s.setMarkerColor(color);
      if (l.whiskerTop() != null) {
        for (int i = 0; i < l.x().size(); i++) {
          XYSeries w = chart.addSeries(l.name() + " P95 " + i, List.of(l.x().get(i), l.x().get(i)),
              List.of(l.y().get(i), l.whiskerTop().get(i)));
          w.setMarker(SeriesMarkers.NONE);
          w.setLineColor(color);
          w.setShowInLegend(false);
        }
      }
    }
    return chart;
  }

  /** Writes {@code base}.png and {@code base}.svg. */
  static void save(XYChart chart, Path base) {
    try {
      Files.createDirectories(base.toAbsolutePath().getParent());
      BitmapEncoder.saveBitmap(chart, base.toString(), BitmapEncoder.BitmapFormat.PNG);
      VectorGraphicsEncoder.saveVectorGraphic(chart, base.toString(), VectorGraphicsEncoder.VectorGraphicsFormat.SVG);
    } catch (IOException e) {
      throw new SampleException(2, "cannot write chart " + base + ": " + e.getMessage());
    }
  }
}
