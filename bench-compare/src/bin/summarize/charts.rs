//! The plotters bar charts of `summarize DIR` (the `charts` feature):
//! `chart-latency-p50.svg` and `chart-blast-total.svg`, one group per
//! (scenario, client) and one bar per leg, with a min-max whisker.

use super::{Results, Spread, CLIENTS, LEGS, SCENARIOS};
use anyhow::{anyhow, Result};
use plotters::prelude::*;
use std::path::Path;

/// Which figure of a row a chart shows.
type Pick = fn(&super::Row) -> Option<Spread>;

const COLOURS: [RGBColor; 3] = [
    RGBColor(31, 119, 180),
    RGBColor(44, 160, 44),
    RGBColor(255, 127, 14),
];

/// Grouped bars: one group per (scenario, client), one bar per leg, with
/// a min-max whisker.
fn bars(path: &Path, title: &str, y_label: &str, results: &Results, pick: Pick) -> Result<bool> {
    let mut groups = Vec::new();
    for (s, _) in SCENARIOS {
        for c in CLIENTS {
            let vals: Vec<Option<Spread>> = LEGS
                .iter()
                .map(|(l, _)| {
                    results
                        .get(&(l.to_string(), s.to_string(), c.to_string()))
                        .and_then(pick)
                })
                .collect();
            if vals.iter().any(Option::is_some) {
                groups.push((format!("{s}/{c}"), vals));
            }
        }
    }
    if groups.is_empty() {
        return Ok(false);
    }
    let top = groups
        .iter()
        .flat_map(|(_, v)| v.iter().flatten().map(|s| s.max))
        .fold(0.0f64, f64::max)
        * 1.1;
    let root = SVGBackend::new(path, (900, 420)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| anyhow!("{e:?}"))?;
    let n = groups.len();
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 18))
        .margin(10)
        .x_label_area_size(30)
        .y_label_area_size(70)
        .build_cartesian_2d(0f64..n as f64, 0f64..top.max(1.0))
        .map_err(|e| anyhow!("{e:?}"))?;
    let labels: Vec<String> = groups.iter().map(|(g, _)| g.clone()).collect();
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(n * 2 + 1)
        .x_label_formatter(&|x| {
            let i = (*x - 0.5).round();
            if (x - 0.5 - i).abs() < 1e-6 && i >= 0.0 && (i as usize) < labels.len() {
                labels[i as usize].clone()
            } else {
                String::new()
            }
        })
        .y_desc(y_label)
        .draw()
        .map_err(|e| anyhow!("{e:?}"))?;
    let width = 0.8 / LEGS.len() as f64;
    for (li, (_, label)) in LEGS.iter().enumerate() {
        let colour = COLOURS[li];
        let mut rects = Vec::new();
        let mut whiskers = Vec::new();
        for (gi, (_, vals)) in groups.iter().enumerate() {
            if let Some(s) = vals[li] {
                let x0 = gi as f64 + 0.1 + li as f64 * width;
                rects.push(Rectangle::new(
                    [(x0, 0.0), (x0 + width * 0.9, s.median)],
                    colour.filled(),
                ));
                let xm = x0 + width * 0.45;
                whiskers.push(PathElement::new(vec![(xm, s.min), (xm, s.max)], BLACK));
            }
        }
        chart
            .draw_series(rects)
            .map_err(|e| anyhow!("{e:?}"))?
            .label(*label)
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 10, y + 5)], colour.filled()));
        chart.draw_series(whiskers).map_err(|e| anyhow!("{e:?}"))?;
    }
    chart
        .configure_series_labels()
        .border_style(BLACK)
        .background_style(WHITE.mix(0.8))
        .draw()
        .map_err(|e| anyhow!("{e:?}"))?;
    root.present().map_err(|e| anyhow!("{e:?}"))?;
    Ok(true)
}

pub fn write(dir: &Path, results: &Results) -> Result<Vec<String>> {
    let mut written = Vec::new();
    let charts: [(&str, &str, &str, Pick); 2] = [
        (
            "chart-latency-p50.svg",
            "p50 latency (median, min-max whisker)",
            "µs",
            |r| r.p50,
        ),
        (
            "chart-blast-total.svg",
            "blast total (median, min-max whisker)",
            "msg/s",
            |r| r.total,
        ),
    ];
    for (file, title, y, pick) in charts {
        if bars(&dir.join(file), title, y, results, pick)? {
            written.push(format!("[{file}]({file})"));
        }
    }
    Ok(written)
}
