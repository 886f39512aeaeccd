package io.nccl4j.cli.bench;

import java.math.BigDecimal;
import java.util.ArrayList;
import java.util.List;

/**
 * The SVG of a chart, written directly rather than through XChart. XChart's SVG of a sweep of 21 sizes and three
 * lines took about 1 MB: its dashed grid lines came out as one outlined rectangle per dash (nine tenths of the
 * bytes), every letter as its glyph outline, every coordinate with nine decimals; and with no {@code <text>}, its
 * labels could be neither searched nor read back. Here text is {@code <text>}, the grid is one path, each line one
 * path and its markers one more (a zero-length stroke per point with a round cap), coordinates rounded to 0.1 px.
 */
public final class SvgChart {
  private SvgChart() {}

  static final int WIDTH = 900;
  static final int HEIGHT = 560;
  private static final double LEFT = 80;
  private static final double RIGHT = WIDTH - 20;
  private static final double TOP = 40;
  private static final double BOTTOM = HEIGHT - 60;
  static final String[] PALETTE = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#7f7f7f",
      "#17becf"};

  /** One tick of an axis: its value in axis units (log2 bytes, log10 or plain) and its label. */
  record Tick(double at, String label) {}

  static String render(Charts.Spec spec) {
    Axis x = spec.logX() ? Axis.bytes(all(spec, true)) : Axis.linear(all(spec, true));
    Axis y = spec.logY() ? Axis.log10(all(spec, false)) : Axis.linear(all(spec, false));
    StringBuilder s = new StringBuilder(8192);
    s.append("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"")
        .append(WIDTH).append("\" height=\"").append(HEIGHT).append("\" viewBox=\"0 0 ").append(WIDTH).append(' ')
        .append(HEIGHT).append("\" font-family=\"sans-serif\" font-size=\"12\">\n");
    s.append("<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n");
    text(s, WIDTH / 2.0, 22, "middle", "font-size=\"15\"", spec.title());
    text(s, (LEFT + RIGHT) / 2, HEIGHT - 14, "middle", "", spec.xTitle());
    s.append("<text transform=\"translate(18 ").append(num((TOP + BOTTOM) / 2)).append(") rotate(-90)\"")
        .append(" text-anchor=\"middle\">").append(escape(spec.yTitle())).append("</text>\n");
    // Grid and frame: one path for all grid lines, one rectangle.
    StringBuilder grid = new StringBuilder();
    s.append("<g class=\"x-ticks\" text-anchor=\"middle\">\n");
    for (Tick t : x.ticks()) {
      double px = x.px(t.at(), LEFT, RIGHT);
      grid.append('M').append(num(px)).append(' ').append(num(TOP)).append('V').append(num(BOTTOM));
      s.append("<text x=\"").append(num(px)).append("\" y=\"").append(num(BOTTOM + 18)).append("\">")
          .append(escape(t.label())).append("</text>\n");
    }
    s.append("</g>\n<g class=\"y-ticks\" text-anchor=\"end\">\n");
    for (Tick t : y.ticks()) {
      double py = y.px(t.at(), BOTTOM, TOP);
      grid.append('M').append(num(LEFT)).append(' ').append(num(py)).append('H').append(num(RIGHT));
      s.append("<text x=\"").append(num(LEFT - 6)).append("\" y=\"").append(num(py + 4)).append("\">")
          .append(escape(t.label())).append("</text>\n");
    }
    s.append("</g>\n<path d=\"").append(grid).append("\" stroke=\"#ddd\" fill=\"none\"/>\n");
    s.append("<rect x=\"").append(num(LEFT)).append("\" y=\"").append(num(TOP)).append("\" width=\"")
        .append(num(RIGHT - LEFT)).append("\" height=\"").append(num(BOTTOM - TOP))
        .append("\" stroke=\"#444\" fill=\"none\"/>\n");
    int k = 0;
    for (Charts.Line l : spec.lines()) {
      String color = PALETTE[k % PALETTE.length];
      StringBuilder line = new StringBuilder();
      StringBuilder dots = new StringBuilder();
      StringBuilder whiskers = new StringBuilder();
      boolean pen = false;
      for (int i = 0; i < l.x().size(); i++) {
        double u = x.value(l.x().get(i));
        double v = y.value(l.y().get(i));
        if (!Double.isFinite(u) || !Double.isFinite(v)) {
          pen = false; // a value the scale cannot show (zero on a log axis) breaks the line there
          continue;
        }
        String px = num(x.px(u, LEFT, RIGHT));
        String py = num(y.px(v, BOTTOM, TOP));
        line.append(pen ? 'L' : 'M').append(px).append(' ').append(py);
        dots.append('M').append(px).append(' ').append(py).append("h0");
        pen = true;
        if (l.whiskerTop() != null && Double.isFinite(y.value(l.whiskerTop().get(i)))) {
          whiskers.append('M').append(px).append(' ').append(py).append('V')
              .append(num(y.px(y.value(l.whiskerTop().get(i)), BOTTOM, TOP)));
        }
      }
      s.append("<g class=\"series\" stroke=\"").append(color).append("\" fill=\"none\">\n");
      s.append("<path d=\"").append(line).append("\" stroke-width=\"2\"/>\n");
      s.append("<path d=\"").append(dots).append("\" stroke-width=\"7\" stroke-linecap=\"round\"/>\n");
      if (whiskers.length() > 0) {
        s.append("<path d=\"").append(whiskers).append("\"/>\n");
      }
      double ly = TOP + 16 + 18 * k;
      s.append("<path d=\"M").append(num(LEFT + 10)).append(' ').append(num(ly)).append("h24\" stroke-width=\"2\"/>\n");
      s.append("</g>\n");
      text(s, LEFT + 40, ly + 4, "start", "", l.name());
      k++;
    }
    return s.append("</svg>\n").toString();
  }

  private static List<Double> all(Charts.Spec spec, boolean xs) {
    List<Double> out = new ArrayList<>();
    for (Charts.Line l : spec.lines()) {
      out.addAll(xs ? l.x() : l.y());
      if (!xs && l.whiskerTop() != null) {
        out.addAll(l.whiskerTop());
      }
    }
    return out;
  }

  private static void text(StringBuilder s, double x, double y, String anchor, String extra, String content) {
    s.append("<text x=\"").append(num(x)).append("\" y=\"").append(num(y)).append("\" text-anchor=\"").append(anchor)
        .append('"').append(extra.isEmpty() ? "" : " " + extra).append('>').append(escape(content))
        .append("</text>\n");
  }

  /** A coordinate to 0.1 px, without a trailing ".0": finer than any screen shows, a third of the digits. */
  static String num(double v) {
    long tenths = Math.round(v * 10);
    String sign = tenths < 0 ? "-" : "";
    long a = Math.abs(tenths);
    return a % 10 == 0 ? sign + a / 10 : sign + a / 10 + "." + a % 10;
  }

  private static String escape(String t) {
    return t.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;");
  }

  /** How values map to the plot: bytes on a log2 scale, other values on a log10 or a linear one. */
  record Axis(java.util.function.DoubleUnaryOperator scale, double lo, double hi, List<Tick> ticks) {
    double value(double raw) {
      return scale.applyAsDouble(raw);
    }

    double px(double at, double from, double to) {
      return from + (at - lo) / (hi - lo) * (to - from);
    }

    /** Log2 of the bytes; ticks at whole powers of two, every 1, 2, 5 or 10 of them, labelled 1 KiB, 64 KiB. */
    static Axis bytes(List<Double> values) {
      java.util.function.DoubleUnaryOperator f = v -> v > 0 ? Math.log(v) / Math.log(2) : Double.NaN;
      double[] r = range(values, f);
      double lo = Math.floor(r[0]);
      double hi = Math.max(Math.ceil(r[1]), lo + 1);
      int step = 1;
      for (int s : new int[] {1, 2, 5, 10}) {
        step = s;
        if ((hi - lo) / s <= 11) {
          break;
        }
      }
      List<Tick> ticks = new ArrayList<>();
      for (long e = (long) lo; e <= hi; e += step) {
        ticks.add(new Tick(e, e >= 0 && e < 63 ? Sizes.format(1L << e) : "2^" + e));
      }
      return new Axis(f, lo, hi, ticks);
    }

    /** Log10, widened to whole decades; ticks at each decade, and at 2 and 5 times it where there are few. */
    static Axis log10(List<Double> values) {
      java.util.function.DoubleUnaryOperator f = v -> v > 0 ? Math.log10(v) : Double.NaN;
      double[] r = range(values, f);
      double lo = Math.floor(r[0]);
      double hi = Math.max(Math.ceil(r[1]), lo + 1);
      List<Tick> ticks = new ArrayList<>();
      for (long e = (long) lo; e <= hi; e++) {
        ticks.add(new Tick(e, plain(BigDecimal.ONE.scaleByPowerOfTen((int) e))));
        if (hi - lo <= 2 && e < hi) {
          for (int m : new int[] {2, 5}) {
            ticks.add(new Tick(e + Math.log10(m), plain(BigDecimal.valueOf(m).scaleByPowerOfTen((int) e))));
          }
        }
      }
      return new Axis(f, lo, hi, ticks);
    }

    /** From zero (or the lowest value, if negative) to the highest, in steps of 1, 2 or 5 times a power of ten. */
    static Axis linear(List<Double> values) {
      double[] r = range(values, v -> v);
      double lo0 = Math.min(0, r[0]);
      double hi0 = r[1] > lo0 ? r[1] : lo0 + 1;
      double raw = (hi0 - lo0) / 6;
      double mag = Math.pow(10, Math.floor(Math.log10(raw)));
      double step = raw / mag <= 1 ? mag : raw / mag <= 2 ? 2 * mag : raw / mag <= 5 ? 5 * mag : 10 * mag;
      double lo = Math.floor(lo0 / step) * step;
      double hi = Math.ceil(hi0 / step) * step;
      List<Tick> ticks = new ArrayList<>();
      for (long i = 0; lo + i * step <= hi + step / 2; i++) {
        double at = lo + i * step;
        ticks.add(new Tick(at, plain(BigDecimal.valueOf(at).round(new java.math.MathContext(6)))));
      }
      return new Axis(v -> v, lo, hi, ticks);
    }

    private static double[] range(List<Double> values, java.util.function.DoubleUnaryOperator f) {
      double min = Double.POSITIVE_INFINITY;
      double max = Double.NEGATIVE_INFINITY;
      for (Double v : values) {
        double u = v == null ? Double.NaN : f.applyAsDouble(v);
        if (Double.isFinite(u)) {
          min = Math.min(min, u);
          max = Math.max(max, u);
        }
      }
      return min <= max ? new double[] {min, max} : new double[] {0, 1};
    }

    private static String plain(BigDecimal d) {
      BigDecimal z = d.stripTrailingZeros();
      return z.abs().compareTo(BigDecimal.valueOf(1_000_000)) >= 0 ? z.toString().replace("E+", "e")
          : z.toPlainString();
    }
  }
}
