//! Bar charts of a summary: per workload, one bar per configuration, its
//! mean relative to `orig` (so workloads of any scale share the axis), with
//! error bars of one standard deviation.

use std::path::Path;

use plotters::prelude::*;
use plotters::style::FontStyle;

use crate::table::Summary;
use crate::Error;

/// Registered with the bundled DejaVu Sans for measuring text; SVG viewers
/// use their own sans-serif.
const FONT: &str = "sans-serif";

fn register_fonts() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // The bundled font is valid; a failure would only mean text-less charts.
        let _ = plotters::style::register_font(FONT, FontStyle::Normal, dejavu::sans::regular());
    });
}

/// A bar: (mean, stdev) relative to orig's mean; `None` where the
/// configuration has no figure.
type Bar = Option<(f64, f64)>;

/// The charts of an evaluation, drawn into its results directory: the
/// figure ([`bars`]), the file's name and the title.
pub const CHARTS: &[(&str, &str, &str)] = &[
    ("perf", "perf.svg", "performance relative to orig"),
    ("rss.avg", "rss.svg", "average RSS relative to orig"),
];

/// Draws `figure` ("perf" for each workload's performance figure, else a
/// figure key such as "rss.avg") to an SVG file. Returns false (and writes
/// nothing) when no workload has `orig` and another configuration to compare.
pub fn bars(summary: &Summary, figure: &str, title: &str, path: &Path) -> Result<bool, Error> {
    register_fonts();
    let configs: Vec<&str> = summary
        .workloads
        .first()
        .map(|w| w.configs.iter().map(|c| c.config.as_str()).collect())
        .unwrap_or_default();
    let groups = groups(summary, figure);
    if groups.is_empty() || configs.len() < 2 {
        return Ok(false);
    }
    let top = groups
        .iter()
        .flat_map(|(_, b)| b.iter().flatten().map(|(m, s)| m + s))
        .fold(1.0f64, f64::max)
        * 1.15;
    let width = (160 + groups.len() as u32 * (40 + 28 * configs.len() as u32)).clamp(500, 4000);
    draw(path, title, &configs, &groups, top, width)?;
    Ok(true)
}

/// Per workload with an `orig` figure (not 0): its name and its bars.
fn groups(summary: &Summary, figure: &str) -> Vec<(String, Vec<Bar>)> {
    let mut groups: Vec<(String, Vec<Bar>)> = Vec::new();
    for w in &summary.workloads {
        let key = if figure == "perf" { w.perf } else { figure };
        let Some(base) = w
            .configs
            .iter()
            .find(|c| c.config == "orig")
            .and_then(|c| c.stats.get(key))
        else {
            continue;
        };
        if base.mean == 0.0 {
            continue;
        }
        let bars = w
            .configs
            .iter()
            .map(|c| {
                c.stats
                    .get(key)
                    .map(|s| (s.mean / base.mean, s.stdev / base.mean))
            })
            .collect();
        groups.push((w.workload.clone(), bars));
    }
    groups
}

/// Draws the chart: the workloads' groups of bars (one colour per
/// configuration), error bars, orig's level, the legend.
fn draw(
    path: &Path,
    title: &str,
    configs: &[&str],
    groups: &[(String, Vec<Bar>)],
    top: f64,
    width: u32,
) -> Result<(), Error> {
    let err = |e: &dyn std::fmt::Display| Error::Other(format!("{}: {e}", path.display()));
    {
        let root = SVGBackend::new(path, (width, 420)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| err(&e))?;
        let n = groups.len();
        let names: Vec<String> = groups.iter().map(|(n, _)| n.clone()).collect();
        let mut chart = ChartBuilder::on(&root)
            .caption(title, (FONT, 18))
            .margin(12)
            .x_label_area_size(30)
            .y_label_area_size(56)
            .build_cartesian_2d(0f64..n as f64, 0f64..top)
            .map_err(|e| err(&e))?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(n * 2 + 1)
            .x_label_formatter(&|x| {
                let i = (x - 0.5).round();
                if (x - 0.5 - i).abs() < 1e-6 && i >= 0.0 && (i as usize) < names.len() {
                    names[i as usize].clone()
                } else {
                    String::new()
                }
            })
            .y_desc("relative to orig")
            .label_style((FONT, 13))
            .axis_desc_style((FONT, 13))
            .draw()
            .map_err(|e| err(&e))?;
        chart
            .draw_series(std::iter::once(PathElement::new(
                vec![(0.0, 1.0), (n as f64, 1.0)],
                BLACK.mix(0.4),
            )))
            .map_err(|e| err(&e))?;
        let k = configs.len() as f64;
        let bw = 0.8 / k;
        for (ci, c) in configs.iter().enumerate() {
            let colour = Palette99::pick(ci).to_rgba();
            let rects: Vec<Rectangle<(f64, f64)>> = groups
                .iter()
                .enumerate()
                .filter_map(|(gi, (_, b))| {
                    let (m, _) = b.get(ci).copied().flatten()?;
                    let x0 = gi as f64 + 0.1 + ci as f64 * bw;
                    Some(Rectangle::new(
                        [(x0, 0.0), (x0 + bw * 0.9, m)],
                        colour.filled(),
                    ))
                })
                .collect();
            chart
                .draw_series(rects)
                .map_err(|e| err(&e))?
                .label(*c)
                .legend(move |(x, y)| {
                    Rectangle::new([(x, y - 5), (x + 10, y + 5)], colour.filled())
                });
            let whiskers: Vec<PathElement<(f64, f64)>> = groups
                .iter()
                .enumerate()
                .filter_map(|(gi, (_, b))| {
                    let (m, s) = b.get(ci).copied().flatten()?;
                    (s > 0.0).then(|| {
                        let x = gi as f64 + 0.1 + ci as f64 * bw + bw * 0.45;
                        PathElement::new(
                            vec![(x, (m - s).max(0.0)), (x, m + s)],
                            BLACK.stroke_width(1),
                        )
                    })
                })
                .collect();
            chart.draw_series(whiskers).map_err(|e| err(&e))?;
        }
        chart
            .configure_series_labels()
            .label_font((FONT, 12))
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK.mix(0.3))
            .position(SeriesLabelPosition::UpperRight)
            .draw()
            .map_err(|e| err(&e))?;
        root.present().map_err(|e| err(&e))?;
    }
    Ok(())
}
