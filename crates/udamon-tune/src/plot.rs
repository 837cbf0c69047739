//! The score curve as a PNG or SVG image: the samples (global and local,
//! or a replay's predictions), the fitted polynomial, the chosen value and
//! its measured score, and any extra curve (a sweep, for comparison).
//!
//! Text is drawn with DejaVu Sans from the `dejavu` crate through plotters'
//! `ab_glyph` backend, as the heatmaps are: no system font is needed.

use std::path::Path;
use std::sync::Once;

use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::FontStyle;

use crate::error::{Error, Result};
use crate::knob::Knob;
use crate::tune::Tuned;

const FONT: &str = "sans-serif";

fn register_fonts() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // The bundled fonts are valid; a failure would only mean text-less images.
        let _ = plotters::style::register_font(FONT, FontStyle::Normal, dejavu::sans::regular());
        let _ = plotters::style::register_font(FONT, FontStyle::Bold, dejavu::sans::bold());
    });
}

/// A labelled extra curve, in the knob's unit and score units.
pub struct Series<'a> {
    pub label: &'a str,
    pub points: &'a [(f64, f64)],
}

/// Whether a plot is a PNG (else an SVG) by `path`'s extension; any other
/// extension is bad input. Checks a path before the work that fills it.
pub fn is_png(path: &Path) -> Result<bool> {
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    match ext.as_deref() {
        Some("png") => Ok(true),
        Some("svg") => Ok(false),
        _ => Err(Error::Usage(format!(
            "--plot {}: unknown image type (expected a .png or .svg file name)",
            path.display()
        ))),
    }
}

/// Writes the plot to `path`: `.png` or `.svg` by its extension.
pub fn write(tuned: &Tuned, knob: &Knob, extra: &[Series], path: &Path) -> Result<()> {
    write_as(tuned, knob, extra, path, is_png(path)?)
}

/// Writes the plot to `path` as a PNG (`png`) or an SVG, whatever its
/// name (a temporary file that is renamed once complete).
pub fn write_as(
    tuned: &Tuned,
    knob: &Knob,
    extra: &[Series],
    path: &Path,
    png: bool,
) -> Result<()> {
    register_fonts();
    let size = (1000, 640);
    let e = |e: String| Error::Plot(format!("{}: {e}", path.display()));
    if png {
        let mut rgb = vec![0u8; size.0 as usize * size.1 as usize * 3];
        {
            let root = BitMapBackend::with_buffer(&mut rgb, size).into_drawing_area();
            draw(&root, tuned, knob, extra).map_err(|x| e(x.to_string()))?;
            root.present().map_err(|x| e(x.to_string()))?;
        }
        // Encoded here so that a failed write reads as an I/O error.
        image::save_buffer_with_format(
            path,
            &rgb,
            size.0,
            size.1,
            image::ColorType::Rgb8,
            image::ImageFormat::Png,
        )
        .map_err(|x| e(x.to_string()))
    } else {
        let root = SVGBackend::new(path, size).into_drawing_area();
        draw(&root, tuned, knob, extra).map_err(|x| e(x.to_string()))?;
        root.present().map_err(|x| e(x.to_string()))
    }
}

type DrawResult<E> = std::result::Result<(), DrawingAreaErrorKind<E>>;

fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    t: &Tuned,
    knob: &Knob,
    extra: &[Series],
) -> DrawResult<DB::ErrorType> {
    root.fill(&WHITE)?;
    let title = match t.mode {
        "replay" => format!("udamon tune --replay: predicted score vs {}", t.knob),
        _ => format!("udamon tune: score vs {}", t.knob),
    };
    let root = root.titled(&title, (FONT, 22).into_font().style(FontStyle::Bold))?;
    let (label, div) = knob.axis(t.domain.hi);
    let (x0, x1) = (t.domain.lo / div, t.domain.hi / div);
    let x1 = if x1 > x0 { x1 } else { x0 + 1.0 };
    let curve = fitted_curve(t, div);
    // y range over everything drawn
    let (y0, y1) = y_range(t, &curve, extra);

    let mut chart = ChartBuilder::on(&root)
        .margin(15)
        .x_label_area_size(50)
        .y_label_area_size(70)
        .build_cartesian_2d(x0..x1, y0..y1)?;
    chart
        .configure_mesh()
        .x_desc(label)
        .y_desc("score")
        .label_style((FONT, 14))
        .axis_desc_style((FONT, 16))
        .light_line_style(RGBColor(235, 235, 235))
        .draw()?;
    // no-schemes level
    chart.draw_series(std::iter::once(PathElement::new(
        vec![(x0, 0.0), (x1, 0.0)],
        RGBColor(160, 160, 160).stroke_width(1),
    )))?;
    let palette = [
        RGBColor(120, 120, 120),
        RGBColor(230, 159, 0),
        RGBColor(0, 158, 115),
    ];
    for (i, s) in extra.iter().enumerate() {
        let c = palette[i % palette.len()];
        let pts: Vec<(f64, f64)> = s.points.iter().map(|&(x, y)| (x / div, y)).collect();
        chart
            .draw_series(LineSeries::new(pts, c.stroke_width(2)))?
            .label(s.label)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2)));
    }
    let blue = RGBColor(0, 114, 178);
    if !curve.is_empty() {
        let deg = t.fit.as_ref().map_or(0, |f| f.degree);
        chart
            .draw_series(LineSeries::new(curve, blue.stroke_width(3)))?
            .label(format!("fitted polynomial (degree {deg})"))
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], blue.stroke_width(3))
            });
    }
    draw_samples(&mut chart, t, div)?;
    draw_chosen(&mut chart, t, div, (y0, y1))?;
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(RGBColor(200, 200, 200))
        .label_font((FONT, 14))
        .position(SeriesLabelPosition::UpperRight)
        .draw()?;
    Ok(())
}

/// The fitted polynomial at 401 points of the domain (in the axis' unit),
/// if there is one.
fn fitted_curve(t: &Tuned, div: f64) -> Vec<(f64, f64)> {
    match &t.fit {
        Some(f) => (0..=400)
            .map(|i| {
                let x = t.domain.lo + (t.domain.hi - t.domain.lo) * i as f64 / 400.0;
                (x / div, f.eval(x))
            })
            .collect(),
        None => Vec::new(),
    }
}

/// The y range over everything drawn (samples, the curve, extra curves,
/// the chosen value's measured score), padded.
fn y_range(t: &Tuned, curve: &[(f64, f64)], extra: &[Series]) -> (f64, f64) {
    let mut ys: Vec<f64> = t.samples.iter().map(|s| s.score).collect();
    ys.extend(curve.iter().map(|p| p.1));
    for s in extra {
        ys.extend(s.points.iter().map(|p| p.1));
    }
    if let Some(m) = &t.chosen.measured {
        ys.push(m.score);
    }
    let (mut y0, mut y1) = ys
        .iter()
        .filter(|v| v.is_finite())
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &v| {
            (a.min(v), b.max(v))
        });
    if !y0.is_finite() {
        (y0, y1) = (-1.0, 1.0);
    }
    let pad = ((y1 - y0) * 0.08).max(1e-3);
    (y0 - pad, y1 + pad)
}

/// The samples: global ones (a replay's predictions) and local ones.
fn draw_samples<DB: DrawingBackend>(
    chart: &mut ChartContext<'_, DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>,
    t: &Tuned,
    div: f64,
) -> DrawResult<DB::ErrorType> {
    let (sample_label, local_label) = match t.mode {
        "replay" => ("predicted by replay", ""),
        _ => ("global samples", "local samples"),
    };
    let black = RGBColor(30, 30, 30);
    let red = RGBColor(213, 94, 0);
    let pts = |stage: &str| -> Vec<(f64, f64)> {
        t.samples
            .iter()
            .filter(|s| s.stage == stage)
            .map(|s| (s.value / div, s.score))
            .collect()
    };
    let global = pts(if t.mode == "replay" {
        "sweep"
    } else {
        "global"
    });
    if !global.is_empty() {
        chart
            .draw_series(
                global
                    .into_iter()
                    .map(|p| Circle::new(p, 5, black.filled())),
            )?
            .label(sample_label)
            .legend(move |(x, y)| Circle::new((x + 10, y), 5, black.filled()));
    }
    let local = pts("local");
    if !local.is_empty() {
        chart
            .draw_series(
                local
                    .into_iter()
                    .map(|p| TriangleMarker::new(p, 7, red.filled())),
            )?
            .label(local_label)
            .legend(move |(x, y)| TriangleMarker::new((x + 10, y), 7, red.filled()));
    }
    Ok(())
}

/// The fit's peak when measured apart from the chosen value, the chosen
/// value's measured score and a line at the chosen value.
fn draw_chosen<DB: DrawingBackend>(
    chart: &mut ChartContext<'_, DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>,
    t: &Tuned,
    div: f64,
    (y0, y1): (f64, f64),
) -> DrawResult<DB::ErrorType> {
    let blue = RGBColor(0, 114, 178);
    if let Some(p) = &t.fit_peak {
        if let (Some(m), true) = (&p.measured, p.value != t.chosen.value) {
            let x = p.value / div;
            chart
                .draw_series(std::iter::once(Circle::new(
                    (x, m.score),
                    8,
                    blue.stroke_width(2),
                )))?
                .label(format!("fit peak {} (measured)", p.display))
                .legend(move |(x, y)| Circle::new((x + 10, y), 6, blue.stroke_width(2)));
        }
    }
    let green = RGBColor(0, 150, 60);
    let cx = t.chosen.value / div;
    if let Some(m) = &t.chosen.measured {
        chart
            .draw_series(std::iter::once(Cross::new(
                (cx, m.score),
                10,
                green.stroke_width(3),
            )))?
            .label(format!("chosen {} (measured)", t.chosen.display))
            .legend(move |(x, y)| Cross::new((x + 10, y), 6, green.stroke_width(3)));
    }
    chart.draw_series(std::iter::once(PathElement::new(
        vec![(cx, y0), (cx, y1)],
        green.stroke_width(1),
    )))?;
    Ok(())
}
