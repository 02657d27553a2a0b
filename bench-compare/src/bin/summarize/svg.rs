//! A hand-written SVG line chart (no plotting crate): one `<polyline>` and
//! its point markers per series over categorical x positions, a linear or a
//! log10 y axis with grid lines and tick labels, axis titles and a legend
//! below the plot. Knows nothing of benchmarks: `depth_chart.rs` feeds it.

use std::fmt::Write as _;

/// How values map onto the y axis.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Scale {
    /// From 0 to a round ceiling above the largest value.
    Linear,
    /// Whole decades around the values (values <= 0 are left out).
    Log,
}

/// One line of the chart.
#[derive(Clone, Debug)]
pub(crate) struct Series {
    pub(crate) label: String,
    /// (index into the categories, value); missing points are left out.
    pub(crate) points: Vec<(usize, f64)>,
}

/// What to draw.
pub(crate) struct Chart<'a> {
    pub(crate) title: &'a str,
    pub(crate) x_title: &'a str,
    pub(crate) y_title: &'a str,
    /// The x tick labels, in order, evenly spaced.
    pub(crate) categories: &'a [String],
    pub(crate) series: &'a [Series],
    pub(crate) scale: Scale,
    /// Unit appended to the markers' tooltips ("MiB", "µs").
    pub(crate) unit: &'a str,
}

const COLOURS: [&str; 8] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
];
const WIDTH: f64 = 820.0;
const LEFT: f64 = 90.0;
const RIGHT: f64 = 30.0;
const TOP: f64 = 50.0;
const PLOT_H: f64 = 300.0;
const LEGEND_ROW: f64 = 20.0;

/// `&`, `<`, `>`, `"` and `'` escaped for text and attribute values.
pub(crate) fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c => out.push(c),
        }
    }
    out
}

/// 12345.6 -> "12,346"; below 10 one decimal ("2.5").
pub(crate) fn fmt_value(v: f64) -> String {
    if v.abs() < 10.0 && v.fract() != 0.0 {
        return format!("{v:.1}");
    }
    let digits = format!("{:.0}", v.abs());
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    if v < 0.0 {
        out.insert(0, '-');
    }
    out
}

/// A round step (1, 2, 2.5 or 5 times a power of ten) near `span / 6`.
fn nice_step(span: f64) -> f64 {
    let raw = (span / 6.0).max(f64::MIN_POSITIVE);
    let power = 10f64.powf(raw.log10().floor());
    let m = raw / power;
    let m = [1.0, 2.0, 2.5, 5.0]
        .into_iter()
        .find(|c| m <= c + 1e-9)
        .unwrap_or(10.0);
    m * power
}

/// `v` (> 0) rounded down (or up) to 1, 2 or 5 times a power of ten.
fn round_125(v: f64, up: bool) -> f64 {
    let power = 10f64.powf(v.log10().floor());
    let m = v / power;
    let eps = 1e-9;
    let m = if up {
        [1.0, 2.0, 5.0, 10.0]
            .into_iter()
            .find(|c| m <= c + eps)
            .unwrap_or(10.0)
    } else {
        [5.0, 2.0, 1.0]
            .into_iter()
            .find(|c| m >= c - eps)
            .unwrap_or(1.0)
    };
    m * power
}

/// The y axis: value range (log10 of it for [`Scale::Log`]) and ticks.
struct Axis {
    lo: f64,
    hi: f64,
    ticks: Vec<f64>,
    scale: Scale,
}

impl Axis {
    fn new(values: &[f64], scale: Scale) -> Axis {
        match scale {
            Scale::Linear => {
                let max = values.iter().copied().fold(0.0f64, f64::max);
                let step = nice_step(if max > 0.0 { max } else { 1.0 });
                let hi = ((max / step).ceil() * step).max(step);
                let n = (hi / step).round() as usize;
                let ticks = (0..=n).map(|i| i as f64 * step).collect();
                Axis {
                    lo: 0.0,
                    hi,
                    ticks,
                    scale,
                }
            }
            Scale::Log => {
                let pos: Vec<f64> = values.iter().copied().filter(|v| *v > 0.0).collect();
                let min = pos.iter().copied().reduce(f64::min).unwrap_or(1.0);
                let max = pos.iter().copied().fold(min, f64::max);
                let (mut lo, mut hi) = (round_125(min, false), round_125(max, true));
                if hi <= lo {
                    lo = round_125(lo * 0.999, false);
                    hi = round_125(hi * 1.001, true);
                }
                // 1-2-5 ticks up to three decades, whole decades beyond.
                let mults: &[f64] = if hi / lo <= 1000.0 * (1.0 + 1e-9) {
                    &[1.0, 2.0, 5.0]
                } else {
                    &[1.0]
                };
                let mut ticks = Vec::new();
                for decade in lo.log10().floor() as i32..=hi.log10().ceil() as i32 {
                    for m in mults {
                        let v = m * 10f64.powi(decade);
                        if v >= lo * (1.0 - 1e-9) && v <= hi * (1.0 + 1e-9) {
                            ticks.push(v);
                        }
                    }
                }
                Axis {
                    lo: lo.log10(),
                    hi: hi.log10(),
                    ticks,
                    scale,
                }
            }
        }
    }

    /// The y pixel of `v`, or `None` if a log axis cannot show it.
    fn y(&self, v: f64) -> Option<f64> {
        let t = match self.scale {
            Scale::Linear => v,
            Scale::Log if v > 0.0 => v.log10(),
            Scale::Log => return None,
        };
        Some(TOP + PLOT_H * (1.0 - (t - self.lo) / (self.hi - self.lo)))
    }
}

/// The whole standalone SVG document.
pub(crate) fn line_chart(c: &Chart) -> String {
    let plot_w = WIDTH - LEFT - RIGHT;
    let n = c.categories.len().max(1);
    let x = |i: usize| LEFT + (i as f64 + 0.5) * plot_w / n as f64;
    let values: Vec<f64> = c
        .series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.1))
        .collect();
    let axis = Axis::new(&values, c.scale);
    let bottom = TOP + PLOT_H;
    let height = bottom + 70.0 + LEGEND_ROW * c.series.len() as f64 + 10.0;

    let mut s = String::new();
    // Writing into a String cannot fail: the results are ignored below.
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(
        s,
        r#"<rect x="0" y="0" width="{WIDTH}" height="{height}" fill="white"/>"#
    );
    let _ = writeln!(
        s,
        r#"<text x="{}" y="28" text-anchor="middle" font-size="16" font-weight="bold">{}</text>"#,
        WIDTH / 2.0,
        escape(c.title)
    );
    // Horizontal grid and y tick labels.
    for &t in &axis.ticks {
        let Some(y) = axis.y(t) else { continue };
        let decade = c.scale == Scale::Linear || (t.log10() - t.log10().round()).abs() < 1e-9;
        let stroke = if decade { "#cccccc" } else { "#eeeeee" };
        let _ = writeln!(
            s,
            r#"<line x1="{LEFT}" y1="{y:.1}" x2="{}" y2="{y:.1}" stroke="{stroke}"/>"#,
            LEFT + plot_w
        );
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{:.1}" text-anchor="end">{}</text>"#,
            LEFT - 6.0,
            y + 4.0,
            fmt_value(t)
        );
    }
    // x ticks and labels.
    for (i, label) in c.categories.iter().enumerate() {
        let xi = x(i);
        let _ = writeln!(
            s,
            r##"<line x1="{xi:.1}" y1="{bottom}" x2="{xi:.1}" y2="{}" stroke="#333333"/>"##,
            bottom + 5.0
        );
        let _ = writeln!(
            s,
            r#"<text x="{xi:.1}" y="{}" text-anchor="middle">{}</text>"#,
            bottom + 20.0,
            escape(label)
        );
    }
    // Axes and their titles.
    let _ = writeln!(
        s,
        r##"<path d="M{LEFT},{TOP} V{bottom} H{}" fill="none" stroke="#333333"/>"##,
        LEFT + plot_w
    );
    let _ = writeln!(
        s,
        r#"<text x="{:.1}" y="{}" text-anchor="middle">{}</text>"#,
        LEFT + plot_w / 2.0,
        bottom + 42.0,
        escape(c.x_title)
    );
    let mid = TOP + PLOT_H / 2.0;
    let _ = writeln!(
        s,
        r#"<text x="20" y="{mid}" text-anchor="middle" transform="rotate(-90 20 {mid})">{}</text>"#,
        escape(c.y_title)
    );
    // One polyline and its markers per series.
    for (k, series) in c.series.iter().enumerate() {
        let colour = COLOURS[k % COLOURS.len()];
        let pts: Vec<(usize, f64, f64)> = series
            .points
            .iter()
            .filter_map(|&(i, v)| Some((i, v, axis.y(v)?)))
            .collect();
        let coords: Vec<String> = pts
            .iter()
            .map(|&(i, _, y)| format!("{:.1},{y:.1}", x(i)))
            .collect();
        let _ = writeln!(
            s,
            r#"<polyline fill="none" stroke="{colour}" stroke-width="2" points="{}"><title>{}</title></polyline>"#,
            coords.join(" "),
            escape(&series.label)
        );
        for &(i, v, y) in &pts {
            let tip = format!(
                "{}: {} {} at {}",
                series.label,
                fmt_value(v),
                c.unit,
                c.categories.get(i).map_or("?", String::as_str)
            );
            let _ = writeln!(
                s,
                r#"<circle cx="{:.1}" cy="{y:.1}" r="3.5" fill="{colour}"><title>{}</title></circle>"#,
                x(i),
                escape(&tip)
            );
        }
        let ly = bottom + 62.0 + LEGEND_ROW * k as f64;
        let _ = writeln!(
            s,
            r#"<line x1="{LEFT}" y1="{ly}" x2="{}" y2="{ly}" stroke="{colour}" stroke-width="2"/><circle cx="{}" cy="{ly}" r="3.5" fill="{colour}"/>"#,
            LEFT + 24.0,
            LEFT + 12.0
        );
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{}">{}</text>"#,
            LEFT + 32.0,
            ly + 4.0,
            escape(&series.label)
        );
    }
    s.push_str("</svg>\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formatting_and_escaping() {
        assert_eq!(fmt_value(1234567.0), "1,234,567");
        assert_eq!(fmt_value(100.0), "100");
        assert_eq!(fmt_value(2.5), "2.5");
        assert_eq!(escape("a<b & \"c\""), "a&lt;b &amp; &quot;c&quot;");
    }

    #[test]
    fn axes_round_out() {
        let lin = Axis::new(&[12.0, 112.1], Scale::Linear);
        assert_eq!((lin.lo, lin.hi), (0.0, 120.0));
        assert_eq!(lin.ticks.first(), Some(&0.0));
        assert_eq!(Axis::new(&[120.4], Scale::Linear).hi, 125.0);
        let log = Axis::new(&[400.0, 12_410.9], Scale::Log);
        assert_eq!(
            log.ticks,
            vec![200.0, 500.0, 1000.0, 2000.0, 5000.0, 10_000.0, 20_000.0]
        );
        assert!(log.y(0.0).is_none());
        assert!(log
            .y(200.0)
            .is_some_and(|y| (y - (TOP + PLOT_H)).abs() < 1e-6));
        // A flat series still gets a span; a wide one decades only.
        let flat = Axis::new(&[500.0, 500.0], Scale::Log);
        assert_eq!(flat.ticks, vec![200.0, 500.0, 1000.0]);
        let wide = Axis::new(&[3.0, 40_000.0], Scale::Log);
        assert_eq!(wide.ticks, vec![10.0, 100.0, 1000.0, 10_000.0]);
    }
}
