//! `tile-plot`: achieved bandwidth against bytes moved, one panel per memory-bound kernel, from
//! `tilec bench --json` (and optionally `bench/peers.py`'s JSON for Triton's line), with the
//! device-to-device copy ceiling drawn in.
//!
//! ```text
//! cargo run --release -p tile-bench-plot -- TILE.json [PEERS.json] --out docs/bandwidth.png
//! ```
//!
//! Text is drawn with a TrueType font read at run time (`--font`, default DejaVu Sans from
//! Debian's `fonts-dejavu-core`).

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{Context, bail};
use clap::Parser;
use plotters::prelude::*;
use plotters::style::{FontStyle, register_font};
use serde_json::Value;

const KERNELS: [&str; 4] = ["vector_add", "softmax", "layernorm", "rmsnorm"];
const DEFAULT_FONT: &str = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";

#[derive(Parser)]
#[command(about = "Draws tile's achieved bandwidth (and Triton's) against bytes moved")]
struct Args {
    /// `tilec bench --json` output.
    tile: PathBuf,
    /// `bench/peers.py --json` output (adds Triton's lines).
    peers: Option<PathBuf>,
    /// The PNG to write.
    #[arg(long, default_value = "bandwidth.png")]
    out: PathBuf,
    /// A title line above the panels (e.g. the GPU and the date).
    #[arg(long, default_value = "")]
    title: String,
    /// A TrueType font for the text.
    #[arg(long, default_value = DEFAULT_FONT)]
    font: PathBuf,
}

/// (bytes, GB/s) points of one line, keyed by (kernel, "who dtype").
type Lines = BTreeMap<(String, String), Vec<(f64, f64)>>;

fn read(path: &PathBuf) -> anyhow::Result<Value> {
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("{} is not JSON", path.display()))
}

/// Adds each case of `doc` whose peer is `who` (tile's cases have no peer field).
fn collect(doc: &Value, who: &str, lines: &mut Lines) {
    let Some(cases) = doc["cases"].as_array() else { return };
    for c in cases {
        let peer = c["peer"].as_str().unwrap_or("tile");
        let (Some(kernel), Some(dtype)) = (c["kernel"].as_str(), c["dtype"].as_str()) else {
            continue;
        };
        if peer != who || !KERNELS.contains(&kernel) || c["check_ok"].as_bool() == Some(false) {
            continue;
        }
        let (Some(bytes), Some(ms)) = (c["bytes"].as_f64(), c["median_ms"].as_f64()) else {
            continue;
        };
        if ms > 0.0 {
            let gbps = bytes / (ms * 1e-3) / 1e9;
            lines
                .entry((kernel.to_string(), format!("{who} {dtype}")))
                .or_default()
                .push((bytes, gbps));
        }
    }
}

fn main() -> anyhow::Result<()> {
    let a = Args::parse();
    let font = std::fs::read(&a.font).with_context(|| {
        format!(
            "cannot read the font {} (install fonts-dejavu-core, or pass --font PATH to a .ttf)",
            a.font.display()
        )
    })?;
    // The font lives as long as the program: plotters keeps a 'static reference.
    let font: &'static [u8] = Box::leak(font.into_boxed_slice());
    if register_font("sans-serif", FontStyle::Normal, font).is_err() {
        bail!("{} is not a TrueType font plotters can read", a.font.display());
    }

    let tile = read(&a.tile)?;
    let mut lines = Lines::new();
    collect(&tile, "tile", &mut lines);
    let mut copy = tile["ceilings"]["copy_gbps"].as_f64();
    if let Some(p) = &a.peers {
        let peers = read(p)?;
        collect(&peers, "triton", &mut lines);
        copy = copy.or(peers["ceilings"]["copy_gbps"].as_f64());
    }
    let kernels: Vec<&str> = KERNELS
        .into_iter()
        .filter(|k| lines.keys().any(|(kk, _)| kk == k))
        .collect();
    if kernels.is_empty() {
        bail!(
            "{}: no memory-bound case ({}) to plot",
            a.tile.display(),
            KERNELS.join(", ")
        );
    }

    let root = BitMapBackend::new(&a.out, (1400, 1000)).into_drawing_area();
    root.fill(&WHITE)?;
    let root = if a.title.is_empty() {
        root
    } else {
        root.titled(&a.title, ("sans-serif", 26))?
    };
    let panels = root.split_evenly((2, 2));
    let ymax = copy
        .unwrap_or(0.0)
        .max(lines.values().flat_map(|v| v.iter().map(|p| p.1)).fold(0.0, f64::max))
        * 1.12;
    for (panel, kernel) in panels.iter().zip(&kernels) {
        let mine: Vec<_> = lines.iter().filter(|((k, _), _)| k == kernel).collect();
        let (lo, hi) = mine
            .iter()
            .flat_map(|(_, v)| v.iter().map(|p| p.0))
            .fold((f64::INFINITY, 0.0f64), |(lo, hi), b| (lo.min(b), hi.max(b)));
        let mut chart = ChartBuilder::on(panel)
            .caption(*kernel, ("sans-serif", 22))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d((lo / 1.5..hi * 1.5).log_scale(), 0.0..ymax)?;
        chart
            .configure_mesh()
            .x_desc("bytes moved (MB)")
            .y_desc("GB/s")
            .x_label_formatter(&|b| format!("{:.0}", b / 1e6))
            .y_label_formatter(&|g| format!("{g:.0}"))
            .light_line_style(WHITE)
            .label_style(("sans-serif", 14))
            .draw()?;
        if let Some(c) = copy {
            chart
                .draw_series(LineSeries::new(
                    [(lo / 1.5, c), (hi * 1.5, c)],
                    ShapeStyle::from(&BLACK).stroke_width(2),
                ))?
                .label(format!("copy ceiling {c:.0} GB/s"))
                .legend(|(x, y)| PathElement::new([(x, y), (x + 18, y)], BLACK.stroke_width(2)));
        }
        for ((_, who), pts) in &mine {
            let mut pts = pts.to_vec();
            pts.sort_by(|a, b| a.0.total_cmp(&b.0));
            // One hue per dtype; tile's lines bold, the peer's thin and lighter.
            let tile = who.starts_with("tile");
            let base = if who.ends_with("bf16") {
                RGBColor(214, 39, 40)
            } else {
                RGBColor(31, 119, 180)
            };
            let color = if tile { base.to_rgba() } else { base.mix(0.55) };
            let style = color.stroke_width(if tile { 3 } else { 2 });
            chart
                .draw_series(LineSeries::new(pts.clone(), style))?
                .label(who.as_str())
                .legend(move |(x, y)| PathElement::new([(x, y), (x + 18, y)], style));
            chart.draw_series(pts.iter().map(|p| Circle::new(*p, 4, color.filled())))?;
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::LowerRight)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .label_font(("sans-serif", 14))
            .draw()?;
    }
    root.present()
        .with_context(|| format!("cannot write {}", a.out.display()))?;
    println!("wrote {}", a.out.display());
    Ok(())
}
