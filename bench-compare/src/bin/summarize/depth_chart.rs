//! `summarize depth [--out-dir DIR] [--prefix NAME] [--label LABEL] FILE.json ...`:
//! the charts and the table of the `depth` bin's results, one JSON file per
//! leg (one node, a 3-node cluster, RabbitMQ, ...). This file owns the
//! subcommand's arguments, reading a depth JSON into a [`Leg`], the two
//! charts it writes into DIR (`NAME-rss.svg`: broker RSS in MiB against the
//! depth checkpoints, the largest node's for a multi-pid run;
//! `NAME-p999.svg`: closed-loop publish -> `accepted` p99.9 in µs, log
//! axis) and the markdown table it prints on stdout. The drawing itself is
//! `svg.rs`. A `--label` names the file after it; without one the leg is
//! named from the file (`depth-<leg>-...` of `run.sh` gets the leg's name).
//!
//! The charts in docs/benchmarks/ were made with (from the repository root):
//!
//! ```sh
//! R=docs/benchmarks/results/2026-12-01-paging
//! cargo run -p ramqp-bench-compare --release --bin summarize -- depth \
//!     --out-dir docs/benchmarks \
//!     --label "ramqp, one node" $R/one-node-256B-1M-f779a0b.json \
//!     --label "ramqp, 3-node cluster" $R/three-node-256B-1M.json
//! chromium --headless --no-sandbox --disable-gpu \
//!     --screenshot=/tmp/depth-rss.png docs/benchmarks/depth-rss.svg   # check it renders
//! ```

use std::ffi::OsString;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde_json::Value;

use super::svg::{self, Chart, Scale, Series};
use super::LEGS;

const USAGE: &str = "usage: summarize depth [--out-dir DIR] [--prefix NAME] \
                     [--label LABEL] FILE.json [[--label LABEL] FILE.json ...]\n  \
                     writes DIR/NAME-rss.svg and DIR/NAME-p999.svg (default: . and depth) \
                     and prints a markdown table; --label names the file after it";

/// The subcommand's arguments.
#[derive(Debug, PartialEq)]
struct Args {
    out_dir: PathBuf,
    prefix: String,
    /// (label given with --label, file), in order.
    files: Vec<(Option<String>, PathBuf)>,
}

fn parse_args(args: impl IntoIterator<Item = OsString>) -> Result<Option<Args>> {
    let mut parsed = Args {
        out_dir: PathBuf::from("."),
        prefix: "depth".to_string(),
        files: Vec::new(),
    };
    let mut label = None;
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        let mut value = |flag: &str| -> Result<String> {
            args.next()
                .with_context(|| format!("{flag} needs a value\n{USAGE}"))?
                .into_string()
                .map_err(|v| anyhow::anyhow!("{flag}: not UTF-8: {v:?}"))
        };
        match arg.to_str() {
            Some("-h" | "--help") => return Ok(None),
            Some("--out-dir") => parsed.out_dir = PathBuf::from(value("--out-dir")?),
            Some("--prefix") => parsed.prefix = value("--prefix")?,
            Some("--label") => label = Some(value("--label")?),
            Some(flag) if flag.starts_with("--") => bail!("unknown flag {flag}\n{USAGE}"),
            _ => parsed.files.push((label.take(), PathBuf::from(arg))),
        }
    }
    if let Some(l) = label {
        bail!("--label {l:?} is not followed by a file\n{USAGE}");
    }
    if parsed.files.is_empty() {
        bail!("no depth JSON files given\n{USAGE}");
    }
    Ok(Some(parsed))
}

/// One checkpoint of a leg.
#[derive(Clone, Debug)]
struct Point {
    checkpoint: u64,
    /// VmRSS of each watched process, MiB (`None`: not read).
    rss_mib: Vec<Option<f64>>,
    /// Closed-loop publish -> accepted p99.9 at this depth, µs.
    p99_9_us: Option<f64>,
}

impl Point {
    /// The largest known node RSS.
    fn max_rss(&self) -> Option<f64> {
        self.rss_mib.iter().flatten().copied().reduce(f64::max)
    }
}

/// One depth result file.
#[derive(Clone, Debug)]
pub(crate) struct Leg {
    label: String,
    file: String,
    commit: String,
    size_bytes: Option<u64>,
    /// Processes whose RSS was read (nodes of a cluster).
    pids: usize,
    points: Vec<Point>,
}

/// The leg's name when no `--label` was given: the leg of a `run.sh` file
/// (`depth-brokerd-quorum-raw.json` -> "ramqp-brokerd"), else the file stem.
fn default_label(path: &Path) -> String {
    let stem = path.file_stem().map_or_else(
        || path.display().to_string(),
        |s| s.to_string_lossy().into_owned(),
    );
    let parts: Vec<&str> = stem.split('-').collect();
    if let ["depth", leg, _queue, _client] = parts[..] {
        if let Some((_, label)) = LEGS.iter().find(|(l, _)| *l == leg) {
            return (*label).to_string();
        }
    }
    stem
}

fn leg(label: String, file: String, v: &Value) -> Result<Leg> {
    if let Some(bench) = v.get("bench").and_then(Value::as_str) {
        if bench != "depth" {
            bail!("{file}: a {bench:?} result, not a depth one");
        }
    }
    let rows = v
        .get("checkpoints")
        .and_then(Value::as_array)
        .with_context(|| format!("{file}: no \"checkpoints\" array (not a depth result?)"))?;
    let mut points = Vec::new();
    for (i, c) in rows.iter().enumerate() {
        let checkpoint = c
            .get("checkpoint")
            .or_else(|| c.get("depth"))
            .and_then(Value::as_u64)
            .with_context(|| format!("{file}: checkpoint #{i} has no depth"))?;
        let kib = |v: &Value| v.as_f64().map(|k| k / 1024.0);
        let per_pid = c
            .pointer("/footprint/rss_kib_per_pid")
            .and_then(Value::as_array);
        let rss_mib = match per_pid {
            Some(list) if !list.is_empty() => list.iter().map(kib).collect(),
            _ => vec![c.get("rss_kib").and_then(kib)],
        };
        points.push(Point {
            checkpoint,
            rss_mib,
            p99_9_us: c.pointer("/probe_us/p99_9").and_then(Value::as_f64),
        });
    }
    let commit = v
        .get("git_commit")
        .and_then(Value::as_str)
        .map_or("?".to_string(), |c| c.chars().take(7).collect());
    let dirty = v.get("git_dirty").and_then(Value::as_bool) == Some(true);
    Ok(Leg {
        label,
        file,
        commit: if dirty {
            format!("{commit}+dirty")
        } else {
            commit
        },
        size_bytes: v.pointer("/settings/size_bytes").and_then(Value::as_u64),
        pids: points.iter().map(|p| p.rss_mib.len()).max().unwrap_or(0),
        points,
    })
}

fn load(label: Option<String>, path: &Path) -> Result<Leg> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let v: Value =
        serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
    let file = path.file_name().map_or_else(
        || path.display().to_string(),
        |f| f.to_string_lossy().into_owned(),
    );
    leg(label.unwrap_or_else(|| default_label(path)), file, &v)
}

/// 0, 10k, 250k, 1M, 1.5M, 1234.
fn fmt_depth(n: u64) -> String {
    if n >= 1_000_000 && n % 100_000 == 0 {
        let m = n as f64 / 1e6;
        if n % 1_000_000 == 0 {
            format!("{m:.0}M")
        } else {
            format!("{m:.1}M")
        }
    } else if n >= 1000 && n % 1000 == 0 {
        format!("{}k", n / 1000)
    } else {
        n.to_string()
    }
}

/// Every leg's checkpoints, merged and sorted: the x axis.
fn checkpoints(legs: &[Leg]) -> Vec<u64> {
    let mut all: Vec<u64> = legs
        .iter()
        .flat_map(|l| l.points.iter().map(|p| p.checkpoint))
        .collect();
    all.sort_unstable();
    all.dedup();
    all
}

/// The RSS line's name: the largest node's for a multi-pid leg.
fn rss_label(leg: &Leg) -> String {
    if leg.pids > 1 {
        format!("{} (largest of {} nodes)", leg.label, leg.pids)
    } else {
        leg.label.clone()
    }
}

fn series(
    legs: &[Leg],
    xs: &[u64],
    pick: fn(&Point) -> Option<f64>,
    name: fn(&Leg) -> String,
) -> Vec<Series> {
    legs.iter()
        .map(|l| Series {
            label: name(l),
            points: l
                .points
                .iter()
                .filter_map(|p| Some((xs.binary_search(&p.checkpoint).ok()?, pick(p)?)))
                .collect(),
        })
        .collect()
}

/// " (256 B bodies)" when every leg used the same body size.
fn subtitle(legs: &[Leg]) -> String {
    let mut sizes: Vec<Option<u64>> = legs.iter().map(|l| l.size_bytes).collect();
    sizes.dedup();
    match sizes[..] {
        [Some(b)] => format!(", {b} B bodies"),
        _ => String::new(),
    }
}

/// (RSS chart, p99.9 chart) as SVG documents.
pub(crate) fn charts(legs: &[Leg]) -> (String, String) {
    let xs = checkpoints(legs);
    let categories: Vec<String> = xs.iter().map(|&n| fmt_depth(n)).collect();
    let sub = subtitle(legs);
    let rss = series(legs, &xs, Point::max_rss, rss_label);
    let p999 = series(legs, &xs, |p| p.p99_9_us, |l| l.label.clone());
    let x_title = "queue depth (messages; the depth bin's checkpoints, evenly spaced)";
    let rss_title = format!("Broker RSS vs queue depth (quorum queue{sub})");
    let p999_title = format!("Publish -> accepted p99.9 vs queue depth (closed loop{sub})");
    let rss_svg = svg::line_chart(&Chart {
        title: &rss_title,
        x_title,
        y_title: "RSS (MiB)",
        categories: &categories,
        series: &rss,
        scale: Scale::Linear,
        unit: "MiB",
    });
    let p999_svg = svg::line_chart(&Chart {
        title: &p999_title,
        x_title,
        y_title: "p99.9 (µs, log scale)",
        categories: &categories,
        series: &p999,
        scale: Scale::Log,
        unit: "µs",
    });
    (rss_svg, p999_svg)
}

/// The markdown: which file is which leg, then one row per checkpoint.
pub(crate) fn table(legs: &[Leg], chart_files: &[String]) -> String {
    let mut out = String::new();
    // Writing into a String cannot fail: the results are ignored below.
    let _ = writeln!(
        out,
        "## Queue depth (`depth`): RSS and publish -> accepted p99.9\n"
    );
    let _ = writeln!(
        out,
        "| leg | file | commit | pids | body B |\n|---|---|---|---:|---:|"
    );
    for l in legs {
        let size = l.size_bytes.map_or("?".to_string(), |b| b.to_string());
        let _ = writeln!(
            out,
            "| {} | `{}` | `{}` | {} | {size} |",
            l.label, l.file, l.commit, l.pids
        );
    }
    let _ = write!(out, "\n| depth |");
    let mut rule = String::from("|---:|");
    for l in legs {
        let nodes = if l.pids > 1 { " (per node)" } else { "" };
        let _ = write!(out, " {} RSS MiB{nodes} | {} p99.9 µs |", l.label, l.label);
        rule.push_str(if l.pids > 1 {
            "---|---:|"
        } else {
            "---:|---:|"
        });
    }
    let _ = writeln!(out, "\n{rule}");
    for x in checkpoints(legs) {
        let _ = write!(out, "| {} |", fmt_depth(x));
        for l in legs {
            let Some(p) = l.points.iter().find(|p| p.checkpoint == x) else {
                let _ = write!(out, " – | – |");
                continue;
            };
            let rss: Vec<String> = p
                .rss_mib
                .iter()
                .map(|r| r.map_or("?".to_string(), |m| format!("{m:.1}")))
                .collect();
            let p999 = p
                .p99_9_us
                .map_or("–".to_string(), |v| svg::fmt_value(v.round()));
            let _ = write!(out, " {} | {p999} |", rss.join(" / "));
        }
        let _ = writeln!(out);
    }
    if !chart_files.is_empty() {
        let links: Vec<String> = chart_files.iter().map(|f| format!("[{f}]({f})")).collect();
        let _ = writeln!(
            out,
            "\nCharts: {} (RSS of a multi-process leg: its largest node's).",
            links.join(", ")
        );
    }
    out
}

/// `summarize depth ...`: the arguments after `depth`.
pub(crate) fn main(args: impl IntoIterator<Item = OsString>) -> Result<()> {
    let Some(args) = parse_args(args)? else {
        println!("{USAGE}");
        return Ok(());
    };
    let legs = args
        .files
        .into_iter()
        .map(|(label, path)| load(label, &path))
        .collect::<Result<Vec<_>>>()?;
    let (rss, p999) = charts(&legs);
    std::fs::create_dir_all(&args.out_dir)
        .with_context(|| format!("creating {}", args.out_dir.display()))?;
    let mut written = Vec::new();
    for (suffix, svg) in [("rss", rss), ("p999", p999)] {
        let name = format!("{}-{suffix}.svg", args.prefix);
        let path = args.out_dir.join(&name);
        std::fs::write(&path, svg).with_context(|| format!("writing {}", path.display()))?;
        eprintln!("summarize depth: wrote {}", path.display());
        written.push(name);
    }
    print!("{}", table(&legs, &written));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn checkpoint(n: u64, rss_kib: &[Option<u64>], p99_9: f64) -> Value {
        json!({
            "checkpoint": n, "depth": n,
            "rss_kib": rss_kib.iter().flatten().sum::<u64>(),
            "footprint": {"rss_kib_per_pid": rss_kib},
            "probe_us": {"p50": p99_9 / 4.0, "p99_9": p99_9},
        })
    }

    fn result(points: Vec<Value>) -> Value {
        json!({
            "bench": "depth", "git_commit": "f779a0b0123", "git_dirty": false,
            "settings": {"size_bytes": 256}, "checkpoints": points,
        })
    }

    #[test]
    fn one_polyline_per_leg_with_labels() {
        let one = result(vec![
            checkpoint(0, &[Some(12 * 1024)], 4440.1),
            checkpoint(10_000, &[Some(22 * 1024)], 965.1),
            checkpoint(1_000_000, &[Some(112 * 1024)], 2927.0),
        ]);
        let three = result(vec![
            checkpoint(0, &[Some(13 * 1024); 3], 9715.7),
            checkpoint(
                1_000_000,
                &[Some(120 * 1024), None, Some(94 * 1024)],
                8970.0,
            ),
        ]);
        let legs = vec![
            leg("one node".into(), "a.json".into(), &one).expect("leg a"),
            leg("3 <nodes>".into(), "b.json".into(), &three).expect("leg b"),
        ];
        let (rss, p999) = charts(&legs);
        for svg in [&rss, &p999] {
            assert!(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
            assert!(svg.trim_end().ends_with("</svg>"));
            assert_eq!(svg.matches("<polyline").count(), 2, "{svg}");
            for tick in [">0<", ">10k<", ">1M<"] {
                assert!(svg.contains(tick), "x tick {tick}");
            }
            assert!(svg.contains(">one node"));
            assert!(svg.contains("256 B bodies"));
        }
        assert!(rss.contains(">3 &lt;nodes&gt; (largest of 3 nodes)<"));
        assert!(rss.contains("RSS (MiB)"));
        assert!(p999.contains(">3 &lt;nodes&gt;<"));
        assert!(p999.contains(">1,000<"), "a log tick");

        let md = table(&legs, &["depth-rss.svg".to_string()]);
        assert!(
            md.contains("| one node RSS MiB | one node p99.9 µs |"),
            "{md}"
        );
        assert!(
            md.contains("| 1M | 112.0 | 2,927 | 120.0 / ? / 94.0 | 8,970 |"),
            "{md}"
        );
        assert!(md.contains("| 10k | 22.0 | 965 | – | – |"), "{md}");
        assert!(md.contains("`f779a0b`"));
        assert!(md.contains("[depth-rss.svg](depth-rss.svg)"));
    }

    #[test]
    fn not_a_depth_result() {
        let latency = json!({"bench": "latency", "checkpoints": []});
        assert!(leg("x".into(), "x.json".into(), &latency).is_err());
        assert!(leg("x".into(), "x.json".into(), &json!({"bench": "depth"})).is_err());
        let no_depth = json!({"checkpoints": [{"rss_kib": 1}]});
        assert!(leg("x".into(), "x.json".into(), &no_depth).is_err());
    }

    #[test]
    fn arguments_and_labels() {
        let os = |v: &[&str]| v.iter().map(OsString::from).collect::<Vec<_>>();
        let a = parse_args(os(&[
            "--out-dir",
            "o",
            "--label",
            "A",
            "a.json",
            "b/depth-brokerd-quorum-raw.json",
        ]))
        .expect("valid")
        .expect("not help");
        assert_eq!(a.out_dir, PathBuf::from("o"));
        assert_eq!(a.files[0], (Some("A".into()), PathBuf::from("a.json")));
        assert_eq!(a.files[1].0, None);
        assert_eq!(default_label(&a.files[1].1), "ramqp-brokerd");
        assert_eq!(default_label(Path::new("x/three-node.json")), "three-node");
        assert!(parse_args(os(&["a.json", "--label"])).is_err());
        assert!(parse_args(os(&["a.json", "--label", "dangling"])).is_err());
        assert!(parse_args(os(&["--bogus", "a.json"])).is_err());
        assert!(parse_args(os(&[])).is_err());
        assert!(parse_args(os(&["--help"])).expect("help").is_none());
        assert_eq!(fmt_depth(1_500_000), "1.5M");
        assert_eq!(fmt_depth(250_000), "250k");
        assert_eq!(fmt_depth(1234), "1234");
    }
}
